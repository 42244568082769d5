/*
 * Unit tests for kagentd's scheduler (agent/daemon/scheduler.c) with fake sessions: the spread
 * over GPUs (least loaded first), the cap on sessions in flight, one claim at a time, idling on
 * an empty queue until a wake (also one that came while a claim was pending), the stop, and
 * fairness across batches when the claims come from the store's round robin.
 */
#include "kagent/daemon/scheduler.h"
#include "kagent/daemon/store.h"

#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"

#include "test.h"

#include <string.h>

/* A fake owner: records the claims and answers them from a count of queued fake sessions,
 * at once or when the test says so. */
struct fake {
	struct kagent_scheduler scheduler;
	size_t claims[64];
	size_t claim_count;
	int queued;
	int deferred; /* leave the claim pending for the test to answer */
	int pending;
};

static void
fake_answer(struct fake *fake, size_t slot)
{
	int found = fake->queued > 0;

	if (found)
		fake->queued--;
	fake->pending = 0;
	kagent_scheduler_claimed(&fake->scheduler, slot, found);
}

static void
fake_claim(size_t slot, void *data)
{
	struct fake *fake = data;

	CHECK(!fake->pending); /* one claim at a time */
	CHECK(fake->claim_count < 64);
	fake->claims[fake->claim_count++] = slot;
	fake->pending = 1;
	if (!fake->deferred)
		fake_answer(fake, slot);
}

static void
fake_init(struct fake *fake, size_t slots, int max_sessions, int queued)
{
	memset(fake, 0, sizeof *fake);
	fake->queued = queued;
	kagent_scheduler_init(&fake->scheduler, slots, max_sessions, fake_claim, fake);
}

/* Sessions go to the least-loaded GPU, lowest index first on a tie. */
static void
test_spread(void)
{
	struct fake fake;

	fake_init(&fake, 3, 6, 10);
	kagent_scheduler_pump(&fake.scheduler);
	CHECK_INT(fake.claim_count, 6);
	CHECK_INT(fake.claims[0], 0);
	CHECK_INT(fake.claims[1], 1);
	CHECK_INT(fake.claims[2], 2);
	CHECK_INT(fake.claims[3], 0);
	CHECK_INT(fake.claims[4], 1);
	CHECK_INT(fake.claims[5], 2);
	/* GPU 1 frees up twice: both next sessions go there, the least loaded. */
	fake.deferred = 1;
	kagent_scheduler_release(&fake.scheduler, 1);
	CHECK_INT(fake.claim_count, 7);
	CHECK_INT(fake.claims[6], 1);
	fake_answer(&fake, 1);
	kagent_scheduler_release(&fake.scheduler, 1);
	kagent_scheduler_release(&fake.scheduler, 1);
	CHECK_INT(fake.claim_count, 8);
	CHECK_INT(fake.claims[7], 1);
	fake_answer(&fake, 1);
	CHECK_INT(fake.claim_count, 9);
	CHECK_INT(fake.claims[8], 1);
	fake_answer(&fake, 1);
	CHECK_INT(fake.scheduler.load[0], 2);
	CHECK_INT(fake.scheduler.load[1], 2);
	CHECK_INT(fake.scheduler.load[2], 2);
	kagent_scheduler_clear(&fake.scheduler);
}

/* Never more than max_sessions in flight; a release lets exactly one more in. */
static void
test_cap(void)
{
	struct fake fake;

	fake_init(&fake, 2, 3, 10);
	kagent_scheduler_pump(&fake.scheduler);
	CHECK_INT(fake.claim_count, 3);
	CHECK_INT(fake.scheduler.in_flight, 3);
	CHECK_INT(kagent_scheduler_next_slot(&fake.scheduler), -1);
	kagent_scheduler_pump(&fake.scheduler);
	kagent_scheduler_wake(&fake.scheduler);
	CHECK_INT(fake.claim_count, 3);
	kagent_scheduler_release(&fake.scheduler, 0);
	CHECK_INT(fake.claim_count, 4);
	CHECK_INT(fake.claims[3], 0);
	CHECK_INT(fake.scheduler.in_flight, 3);
	/* A release of a slot with nothing on it changes nothing. */
	kagent_scheduler_release(&fake.scheduler, 7);
	CHECK_INT(fake.scheduler.in_flight, 3);
	kagent_scheduler_clear(&fake.scheduler);
}

/* An empty queue idles the scheduler; a wake claims again; a pending claim's slot counts. */
static void
test_idle_and_wake(void)
{
	struct fake fake;

	fake_init(&fake, 1, 4, 1);
	kagent_scheduler_pump(&fake.scheduler);
	CHECK_INT(fake.claim_count, 2); /* one found, then none */
	CHECK_INT(fake.scheduler.in_flight, 1);
	CHECK(fake.scheduler.idle);
	kagent_scheduler_pump(&fake.scheduler);
	CHECK_INT(fake.claim_count, 2);
	fake.queued = 2;
	kagent_scheduler_wake(&fake.scheduler);
	CHECK_INT(fake.claim_count, 5);
	CHECK_INT(fake.scheduler.in_flight, 3);
	/* A wake while a claim is pending that then finds nothing: the claim is asked again,
	 * since the wake's batch may have been queued after the store looked. */
	fake.deferred = 1;
	kagent_scheduler_wake(&fake.scheduler);
	CHECK_INT(fake.claim_count, 6);
	CHECK_INT(fake.scheduler.load[0], 4);
	kagent_scheduler_release(&fake.scheduler, 0); /* no second claim while one is pending */
	CHECK_INT(fake.claim_count, 6);
	kagent_scheduler_wake(&fake.scheduler);
	CHECK_INT(fake.claim_count, 6);
	fake_answer(&fake, 0); /* nothing */
	CHECK_INT(fake.claim_count, 7);
	CHECK(!fake.scheduler.idle);
	fake_answer(&fake, 0); /* nothing again, no wake meanwhile: idle */
	CHECK(fake.scheduler.idle);
	CHECK_INT(fake.scheduler.in_flight, 2);
	kagent_scheduler_clear(&fake.scheduler);
}

/* After stop, nothing is claimed; the counts still follow the sessions that end. */
static void
test_stop(void)
{
	struct fake fake;

	fake_init(&fake, 2, 4, 10);
	kagent_scheduler_pump(&fake.scheduler);
	CHECK_INT(fake.claim_count, 4);
	kagent_scheduler_stop(&fake.scheduler);
	kagent_scheduler_release(&fake.scheduler, 0);
	kagent_scheduler_wake(&fake.scheduler);
	CHECK_INT(fake.claim_count, 4);
	CHECK_INT(fake.scheduler.in_flight, 3);
	kagent_scheduler_clear(&fake.scheduler);
}

/* Claims from the store: two batches of three and one session at a time alternate between
 * the batches, and every session runs once. */
struct store_owner {
	struct kagent_scheduler scheduler;
	struct kagent_store *store;
	char *order[16];
	size_t count;
	int found_last;
};

static void
store_claim(size_t slot, void *data)
{
	struct store_owner *owner = data;
	struct kagent_store_claim *claim = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_store_session_claim(owner->store, "0", &claim, &cause), 0);
	owner->found_last = claim != NULL;
	if (claim != NULL) {
		owner->order[owner->count++] = kagent_strdup(claim->batch_id);
		kagent_store_claim_free(claim);
	}
	kagent_scheduler_claimed(&owner->scheduler, slot, owner->found_last);
}

static void
test_fair_across_batches(void)
{
	struct store_owner owner = {0};
	struct kagent_store_problem problems[3] = {
	    {.path = "/p/a.py"}, {.path = "/p/b.py"}, {.path = "/p/c.py"}};
	char *directory = kagent_test_make_directory(), *url, *cause = NULL, *first = NULL,
	     *second = NULL;

	url = kagent_asprintf("sqlite:%s/db", directory);
	CHECK_INT(kagent_store_open(url, &owner.store, &cause), 0);
	CHECK_INT(kagent_store_batch_create(owner.store, NULL, problems, 3, &first, &cause), 0);
	CHECK_INT(kagent_store_batch_create(owner.store, NULL, problems, 3, &second, &cause), 0);
	kagent_scheduler_init(&owner.scheduler, 1, 1, store_claim, &owner);
	kagent_scheduler_pump(&owner.scheduler);
	while (owner.found_last)
		kagent_scheduler_release(&owner.scheduler, 0);
	CHECK_INT(owner.count, 6);
	for (size_t index = 0; index < owner.count; index++) {
		CHECK_STRING(owner.order[index], index % 2 == 0 ? first : second);
		free(owner.order[index]);
	}
	kagent_scheduler_clear(&owner.scheduler);
	kagent_store_close(owner.store);
	CHECK_INT(kagent_paths_remove_tree(directory, &cause), 0);
	free(first);
	free(second);
	free(url);
	free(directory);
}

static const struct kagent_test tests[] = {
    {"spread", test_spread},
    {"cap", test_cap},
    {"idle_and_wake", test_idle_and_wake},
    {"stop", test_stop},
    {"fair_across_batches", test_fair_across_batches},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 30)
