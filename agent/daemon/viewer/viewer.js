/*
 * kagent's web viewer (docs/viewer.md): reads kagentd's JSON routes for the batches and
 * follows two Server-Sent Event streams, GET /v1/events (session and batch changes) and
 * GET /v1/sessions/ID/events (one session's trace records, docs/traces.md), rebuilding the
 * session's turns, variants, verdicts and speedups from the records alone.
 *
 * Everything the model or a trace wrote reaches the page as text (textContent), never as
 * markup; the one HTML inserted is highlight.js's output, which escapes its input. Over TCP
 * the daemon's cookie (set by /?token=...) authenticates the page's requests: this script
 * never sees the token.
 */
"use strict";

/* ---- small helpers ---- */

function element(tag, className, text) {
	const node = document.createElement(tag);
	if (className) node.className = className;
	if (text !== undefined && text !== null) node.textContent = String(text);
	return node;
}

function clear(node) {
	while (node.firstChild) node.removeChild(node.firstChild);
}

function byId(id) {
	return document.getElementById(id);
}

function formatSpeedup(value) {
	return typeof value === "number" && value > 0 ? value.toFixed(2) + "x" : "–";
}

function formatCost(value) {
	return typeof value === "number" ? "$" + value.toFixed(4) : "–";
}

/* A run's baseline (traces.md's "best" record) as a person reads it. */
function baselineName(baseline) {
	return {eager: "eager", compile: "torch.compile", best: "eager/torch.compile"}[baseline] ||
		baseline;
}

function firstLine(text, cap) {
	const line = String(text || "").split("\n")[0];
	return line.length > cap ? line.slice(0, cap) + "…" : line;
}

function parseJson(text) {
	try {
		return JSON.parse(text);
	} catch (error) {
		return null;
	}
}

async function getJson(path) {
	const response = await fetch(path, {credentials: "same-origin", cache: "no-store"});
	if (response.status === 401) {
		showProblem("The daemon asks for its token: open this page once as /?token=TOKEN.");
		throw new Error("401 from " + path);
	}
	if (!response.ok) throw new Error(response.status + " from " + path);
	return response.json();
}

function showProblem(text) {
	const banner = byId("problem-banner");
	banner.textContent = text;
	banner.hidden = false;
}

/* Calls render at most once per animation frame, however many records arrive. */
function throttled(render) {
	let pending = false;
	return function () {
		if (pending) return;
		pending = true;
		requestAnimationFrame(function () {
			pending = false;
			render();
		});
	};
}

/* ---- line diff (Myers' O(ND) algorithm) ---- */

/* The edit script from a to b (arrays of lines): [{op: "=", "-" or "+", a, b}] where a and
 * b are line indexes (-1 where the line is not on that side). */
function diffLines(a, b) {
	const n = a.length, m = b.length, max = n + m, offset = max + 1;
	const v = new Int32Array(2 * max + 3);
	const trace = [];
	let x, y, d, k;

	v[offset + 1] = 0;
	search: for (d = 0; d <= max; d++) {
		trace.push(v.slice(offset - d - 1, offset + d + 2));
		for (k = -d; k <= d; k += 2) {
			if (k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]))
				x = v[offset + k + 1];
			else
				x = v[offset + k - 1] + 1;
			y = x - k;
			while (x < n && y < m && a[x] === b[y]) {
				x++;
				y++;
			}
			v[offset + k] = x;
			if (x >= n && y >= m) break search;
		}
	}
	const script = [];
	x = n;
	y = m;
	for (d = trace.length - 1; d >= 0; d--) {
		const snapshot = trace[d], at = function (kk) { return snapshot[kk + d + 1]; };
		k = x - y;
		const previousK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
		const previousX = d === 0 ? 0 : at(previousK), previousY = previousX - previousK;
		while (x > previousX && y > previousY) {
			x--;
			y--;
			script.push({op: "=", a: x, b: y});
		}
		if (d > 0) {
			if (x === previousX) script.push({op: "+", a: -1, b: y - 1});
			else script.push({op: "-", a: x - 1, b: -1});
		}
		x = previousX;
		y = previousY;
	}
	return script.reverse();
}

/* Each line of source as highlighted HTML (Python; the CUDA in its strings stays a string),
 * or null without highlight.js. Highlighting runs line by line with highlight.js's
 * continuation, so a string over many lines stays one. */
function highlightLines(lines) {
	if (typeof hljs === "undefined" || !hljs.getLanguage("python")) return null;
	let top;
	return lines.map(function (line) {
		const result = hljs.highlight("python", line, true, top);
		top = result.top;
		return result.value;
	});
}

/* ---- one session, rebuilt from its trace records ---- */

class SessionModel {
	constructor(id) {
		this.id = id;
		this.records = 0;
		this.lastSeq = 0;
		this.problem = null;
		this.baseline = null;
		this.turn = 0;
		this.totals = null;
		this.limits = null;
		this.best = null;
		this.stop = null;
		this.state = null;
		this.calls = new Map();	   /* tool call id -> the arguments the model sent */
		this.variants = new Map(); /* "v3" -> variant */
		this.turns = new Map();	   /* turn -> {best, evaluated}: confirmed best, best correct */
	}

	variant(id) {
		let variant = this.variants.get(id);
		if (!variant) {
			variant = {id: id, number: parseInt(id.slice(1), 10) || 0, turn: null, source: null,
				note: "", status: null, reason: null, speedup: null, confirmed: null,
				parent: null};
			this.variants.set(id, variant);
		}
		return variant;
	}

	turnEntry(turn) {
		let entry = this.turns.get(turn);
		if (!entry) {
			entry = {best: null, evaluated: null};
			this.turns.set(turn, entry);
		}
		return entry;
	}

	add(record) {
		this.records++;
		if (typeof record.seq === "number") this.lastSeq = Math.max(this.lastSeq, record.seq);
		if (typeof record.turn === "number") this.turn = Math.max(this.turn, record.turn);
		switch (record.type) {
		case "run_start":
			this.problem = record.problem_name || record.problem;
			break;
		case "tool_call":
			this.calls.set(record.id, parseJson(record.arguments));
			break;
		case "tool_result": {
			/* evaluate answers "v3 ..." whenever it made a variant, even one that failed. */
			const args = this.calls.get(record.id);
			const match = /^(v\d+)\b/.exec(record.content || "");
			if (record.name === "evaluate" && match) {
				const variant = this.variant(match[1]);
				if (args && typeof args.source === "string") variant.source = args.source;
				if (args && typeof args.note === "string") variant.note = args.note;
				if (variant.turn === null) variant.turn = record.turn;
				if (record.is_error && !variant.status) {
					variant.status = "error";
					variant.reason = firstLine(record.content.slice(match[1].length + 1), 300);
				}
			}
			break;
		}
		case "verdict": {
			const variant = this.variant(record.variant);
			/* The session names the parent (traces.md): the earlier variant the model
			 * wrote this one from, as read from their sources. */
			if (typeof record.parent === "string") variant.parent = record.parent;
			if (record.purpose === "evaluate") {
				variant.status = record.status;
				variant.reason = record.reason;
				variant.speedup = record.speedup;
				if (variant.turn === null) variant.turn = record.turn;
				if (typeof record.turn === "number" && record.status === "correct" &&
				    typeof record.speedup === "number") {
					const entry = this.turnEntry(record.turn);
					entry.evaluated = Math.max(entry.evaluated || 0, record.speedup);
				}
			} else if (record.purpose === "confirm" || record.purpose === "final") {
				variant.confirmed = record.status === "correct";
			}
			break;
		}
		case "best":
			/* Confirmed on unseen seeds: it may come after its turn's turn_end. */
			this.best = {variant: record.variant, speedup: record.speedup};
			this.baseline = record.baseline || this.baseline;
			if (typeof record.turn === "number")
				this.turnEntry(record.turn).best = record.speedup;
			break;
		case "turn_end":
			this.totals = record.totals;
			this.limits = record.limits;
			if (record.best) this.best = record.best;
			if (typeof record.turn === "number" && record.best)
				this.turnEntry(record.turn).best = record.best.speedup;
			else if (typeof record.turn === "number")
				this.turnEntry(record.turn);
			break;
		case "stop":
			this.stop = record;
			break;
		}
	}

	orderedVariants() {
		return Array.from(this.variants.values()).sort(function (a, b) {
			return a.number - b.number;
		});
	}
}

/* ---- the page ---- */

const viewer = {
	batches: new Map(),  /* id -> batch (list entry, updated by events) */
	batchId: null,
	sessionRows: new Map(),	/* id -> row data of the shown batch */
	session: null,	     /* SessionModel of the shown session */
	sessionStream: null,
	chart: null,
	diffChosen: false,   /* the person chose the diff's sides */
};

function describeRecord(record) {
	switch (record.type) {
	case "run_start":
		return (record.resumed ? "resumed " : "started ") + (record.problem_name || "");
	case "problem_check":
		return "problem check: " + record.status + (record.message ? " — " + record.message : "");
	case "message":
		return "kagent → model: " + firstLine(record.content, 160);
	case "reply": {
		const usage = record.usage || {};
		const calls = record.message && record.message.tool_calls
			? record.message.tool_calls.length : 0;
		return "model replied: " + (usage.input_tokens || 0) + " in / " +
			(usage.output_tokens || 0) + " out tokens, " + formatCost(record.cost) + ", " +
			calls + " tool call" + (calls === 1 ? "" : "s") +
			(record.message && record.message.content
				? " — " + firstLine(record.message.content, 160) : "");
	}
	case "retry":
		return "retry " + record.attempt + ": " + record.failure + " " + (record.reason || "");
	case "llm_error":
		return "model error: " + record.failure + " " + (record.message || "");
	case "tool_call": {
		const args = parseJson(record.arguments) || {};
		let detail = "";
		if (typeof args.source === "string")
			detail = args.source.split("\n").length + " lines" +
				(args.note ? " — " + firstLine(args.note, 120) : "");
		else if (args.variant) detail = args.variant;
		else if (args.summary) detail = firstLine(args.summary, 160);
		return "→ " + record.name + (detail ? " (" + detail + ")" : "");
	}
	case "tool_result":
		return "← " + record.name + (record.is_error ? " failed: " : ": ") +
			firstLine(record.content, 200);
	case "verdict":
		return record.variant + " " + record.purpose + ": " + record.status +
			(record.reason ? " — " + record.reason : "");
	case "commit":
		return record.variant + " committed " + String(record.commit || "").slice(0, 10);
	case "best":
		return "new best: " + record.variant + " " + formatSpeedup(record.speedup) + " vs " +
			baselineName(record.baseline);
	case "turn_end": {
		const totals = record.totals || {};
		return "turn " + record.turn + " ends: " + (totals.turns || 0) + " turns, " +
			formatCost(totals.cost) + " spent";
	}
	case "stop":
		return "stop: " + record.reason + (record.detail ? " — " + record.detail : "");
	case "final":
		return "final: " + (record.variant || "no variant") +
			(record.confirmed ? " (confirmed)" : "") + ", " + record.stop_reason;
	default:
		return record.type;
	}
}

/* The transport's own records (every request body, every streamed event) are many and large;
 * the timeline shows what they led to (reply, retry, llm_error). */
const quietTypes = new Set(["request", "stream"]);

function appendTimeline(record) {
	if (quietTypes.has(record.type)) return;
	const list = byId("timeline");
	const last = list.lastElementChild;
	if (typeof record.turn === "number" && (!last || last.dataset.turn !== String(record.turn))) {
		const header = element("li", "turn-header", "Turn " + record.turn);
		header.dataset.turn = String(record.turn);
		list.appendChild(header);
	}
	const item = element("li", "record type-" + record.type);
	item.dataset.seq = String(record.seq);
	if (typeof record.turn === "number") item.dataset.turn = String(record.turn);
	item.appendChild(element("span", "seq", "#" + record.seq));
	item.appendChild(element("span", "time",
		String(record.time || "").replace(/^.*T/, "").replace(/Z$/, "")));
	const text = element("span", "text", describeRecord(record));
	if ((record.type === "tool_result" && record.is_error) || record.type === "llm_error" ||
	    (record.type === "verdict" && record.status !== "correct"))
		text.classList.add("bad");
	item.appendChild(text);
	list.appendChild(item);
}

function statusClass(status) {
	if (status === "correct") return "good";
	if (status === null || status === undefined) return "pending";
	return "bad";
}

function renderSummary() {
	const model = viewer.session, summary = byId("session-summary");
	const totals = model.totals || {}, limits = model.limits || {};
	const row = viewer.sessionRows.get(model.id) || {};
	const pairs = [
		["state", model.state || row.state || "–"],
		["problem", model.problem || row.problem || "–"],
		["turns", (totals.turns || model.turn || 0) + (limits.max_turns ? " / " +
			limits.max_turns : "")],
		["cost", formatCost(totals.cost) + (limits.max_cost ? " / " +
			formatCost(limits.max_cost) : "")],
		["tokens", ((totals.input_tokens || 0) + (totals.output_tokens || 0)) +
			(limits.max_tokens ? " / " + limits.max_tokens : "")],
		["best", model.best ? model.best.variant + " " + formatSpeedup(model.best.speedup) +
			(model.baseline ? " vs " + baselineName(model.baseline) : "") : "–"],
		["records", model.records],
	];
	if (model.stop) pairs.push(["stopped", model.stop.reason + (model.stop.detail ? ": " +
		model.stop.detail : "")]);
	clear(summary);
	pairs.forEach(function (pair) {
		summary.appendChild(element("dt", null, pair[0]));
		summary.appendChild(element("dd", null, pair[1]));
	});
}

function variantLabel(variant) {
	return variant.id + " · turn " + (variant.turn === null ? "?" : variant.turn);
}

function renderVariants() {
	const model = viewer.session, tree = byId("variant-tree");
	const children = new Map();
	const roots = [];
	model.orderedVariants().forEach(function (variant) {
		if (variant.parent && model.variants.has(variant.parent)) {
			if (!children.has(variant.parent)) children.set(variant.parent, []);
			children.get(variant.parent).push(variant);
		} else {
			roots.push(variant);
		}
	});
	function node(variant) {
		const item = element("li", "variant " + statusClass(variant.status));
		item.dataset.variant = variant.id;
		const line = element("div", "variant-line");
		line.appendChild(element("span", "variant-id", variantLabel(variant)));
		line.appendChild(element("span", "badge " + statusClass(variant.status),
			variant.status || "evaluating"));
		if (variant.status === "correct")
			line.appendChild(element("span", "speedup", formatSpeedup(variant.speedup)));
		if (model.best && model.best.variant === variant.id)
			line.appendChild(element("span", "badge best", "best"));
		if (variant.confirmed !== null)
			line.appendChild(element("span", "badge " + (variant.confirmed ? "good" : "bad"),
				variant.confirmed ? "confirmed" : "not confirmed"));
		line.addEventListener("click", function () { chooseDiff(variant.id); });
		item.appendChild(line);
		if (variant.note) item.appendChild(element("div", "note", variant.note));
		if (variant.status && variant.status !== "correct" && variant.reason)
			item.appendChild(element("div", "reason", variant.reason));
		const kids = children.get(variant.id);
		if (kids) {
			const list = element("ul");
			kids.forEach(function (kid) { list.appendChild(node(kid)); });
			item.appendChild(list);
		}
		return item;
	}
	clear(tree);
	roots.forEach(function (root) { tree.appendChild(node(root)); });
	if (roots.length === 0) tree.appendChild(element("li", "hint", "No variant yet."));
	renderDiffChoices();
}

/* The "to" side follows a clicked variant; "from" becomes its parent. From then on the diff
 * stays where the person put it; until then it follows the latest variant. */
function chooseDiff(id) {
	const variant = viewer.session.variants.get(id);
	viewer.diffChosen = true;
	byId("diff-to").value = id;
	byId("diff-from").value = variant && variant.parent ? variant.parent : "";
	renderDiff();
}

function renderDiffChoices() {
	const model = viewer.session;
	const from = byId("diff-from"), to = byId("diff-to");
	const withSource = model.orderedVariants().filter(function (v) { return v.source !== null; });
	const keepFrom = from.value, keepTo = to.value;
	if (to.options.length === withSource.length) return;
	clear(from);
	clear(to);
	from.appendChild(element("option", null, "(empty)")).value = "";
	withSource.forEach(function (variant) {
		from.appendChild(element("option", null, variant.id)).value = variant.id;
		to.appendChild(element("option", null, variant.id)).value = variant.id;
	});
	if (withSource.length === 0) return;
	const latest = withSource[withSource.length - 1];
	if (viewer.diffChosen && keepTo) {
		to.value = keepTo;
		from.value = keepFrom;
	} else {
		to.value = latest.id;
		from.value = latest.parent || "";
	}
	renderDiff();
}

function renderDiff() {
	const model = viewer.session, table = byId("diff");
	const fromVariant = model.variants.get(byId("diff-from").value);
	const toVariant = model.variants.get(byId("diff-to").value);
	clear(table);
	if (!toVariant || toVariant.source === null) {
		byId("diff-stats").textContent = "";
		return;
	}
	const a = fromVariant && fromVariant.source !== null ? fromVariant.source.split("\n") : [];
	const b = toVariant.source.split("\n");
	const highlightedA = highlightLines(a), highlightedB = highlightLines(b);
	const script = diffLines(a, b);
	let added = 0, removed = 0;
	const body = element("tbody");
	script.forEach(function (step) {
		const row = element("tr", step.op === "+" ? "added" : step.op === "-" ? "removed" :
			"same");
		row.appendChild(element("td", "line-number", step.a >= 0 ? step.a + 1 : ""));
		row.appendChild(element("td", "line-number", step.b >= 0 ? step.b + 1 : ""));
		row.appendChild(element("td", "marker", step.op === "=" ? " " : step.op));
		const code = element("td", "code hljs");
		const fromB = step.b >= 0;
		const html = fromB ? highlightedB && highlightedB[step.b]
			: highlightedA && highlightedA[step.a];
		if (html !== null && html !== undefined) code.innerHTML = html;
		else code.textContent = fromB ? b[step.b] : a[step.a];
		row.appendChild(code);
		body.appendChild(row);
		if (step.op === "+") added++;
		if (step.op === "-") removed++;
	});
	table.appendChild(body);
	byId("diff-stats").textContent = (fromVariant ? fromVariant.id : "(empty)") + " → " +
		toVariant.id + ": +" + added + " −" + removed;
}

function renderChart() {
	const model = viewer.session;
	if (typeof Chart === "undefined") return;
	const turns = Array.from(model.turns.keys()).sort(function (a, b) { return a - b; });
	const labels = turns.map(String);
	/* The best so far: the latest confirmed best at or before each turn. */
	let sofar = null;
	const best = turns.map(function (t) {
		const value = model.turns.get(t).best;
		if (typeof value === "number") sofar = Math.max(sofar || 0, value);
		return sofar;
	});
	const evaluated = turns.map(function (t) { return model.turns.get(t).evaluated; });
	if (!viewer.chart) {
		viewer.chart = new Chart(byId("speedup-chart"), {
			type: "line",
			data: {labels: [], datasets: [
				{label: "best so far", data: [], borderColor: "#1a7f37",
					backgroundColor: "#1a7f37", stepped: true, spanGaps: true},
				{label: "best correct candidate of the turn", data: [],
					borderColor: "#0969da", backgroundColor: "#0969da", showLine: false,
					pointRadius: 4},
			]},
			options: {animation: false, responsive: true, maintainAspectRatio: false,
				scales: {x: {title: {display: true, text: "turn"}},
					y: {beginAtZero: true, title: {display: true, text: "speedup"}}}},
		});
	}
	viewer.chart.data.labels = labels;
	viewer.chart.data.datasets[0].data = best;
	viewer.chart.data.datasets[0].label = "best so far" +
		(model.baseline ? " (vs " + baselineName(model.baseline) + ")" : "");
	viewer.chart.data.datasets[1].data = evaluated;
	viewer.chart.update("none");
}

const renderSession = throttled(function () {
	if (!viewer.session) return;
	renderSummary();
	renderVariants();
	renderChart();
});

/* ---- batches and sessions ---- */

function renderBatchList() {
	const list = byId("batch-list");
	clear(list);
	const batches = Array.from(viewer.batches.values()).sort(function (a, b) {
		return String(b.created_at || b.id).localeCompare(String(a.created_at || a.id));
	});
	batches.forEach(function (batch) {
		const item = element("li", batch.id === viewer.batchId ? "chosen" : "");
		const link = element("a", null, batch.id);
		link.href = "#/batch/" + encodeURIComponent(batch.id);
		item.appendChild(link);
		item.appendChild(element("span", "badge state-" + batch.state, batch.state));
		item.appendChild(progressBar(batch.counts || {}));
		list.appendChild(item);
	});
	if (batches.length === 0) list.appendChild(element("li", "hint", "No batch yet."));
}

function progressBar(counts) {
	const bar = element("div", "progress");
	const total = ["queued", "running", "done", "failed", "cancelled"].reduce(function (sum, key) {
		return sum + (counts[key] || 0);
	}, 0);
	["done", "failed", "cancelled", "running", "queued"].forEach(function (key) {
		if (!counts[key]) return;
		const part = element("span", "part state-" + key);
		part.style.width = (100 * counts[key] / total) + "%";
		part.title = counts[key] + " " + key;
		bar.appendChild(part);
	});
	bar.title = ["done", "failed", "cancelled", "running", "queued"].map(function (key) {
		return (counts[key] || 0) + " " + key;
	}).join(", ");
	return bar;
}

/* A session of GET /v1/batches/ID, or of a "session" event, as one table row's data. */
function sessionRow(session) {
	const live = session.live || {};
	const result = session.result || {};
	const totals = result.totals || {};
	return {
		id: session.id,
		problem: session.problem,
		state: session.state,
		gpu: session.gpu,
		turns: session.turns !== undefined ? session.turns : live.turn || totals.turns || 0,
		cost: session.cost !== undefined ? session.cost : live.cost !== undefined ? live.cost
			: totals.cost,
		best: session.best !== undefined ? (session.best ? session.best.speedup : null)
			: session.best_speedup !== undefined && session.best_speedup !== null
				? session.best_speedup : live.best ? live.best.speedup : null,
	};
}

function renderSessionTable() {
	const body = byId("session-table").tBodies[0];
	const batch = viewer.batches.get(viewer.batchId) || {};
	const maxTurns = batch.settings && batch.settings.max_turns;
	const maxCost = batch.settings && batch.settings.max_cost;
	clear(body);
	viewer.sessionRows.forEach(function (row) {
		const tr = element("tr", viewer.session && viewer.session.id === row.id ? "chosen" : "");
		tr.dataset.session = row.id;
		const cell = element("td");
		const link = element("a", null, row.id);
		link.href = "#/session/" + encodeURIComponent(row.id);
		cell.appendChild(link);
		tr.appendChild(cell);
		tr.appendChild(element("td", null, row.problem));
		tr.appendChild(element("td", "state-" + row.state, row.state));
		tr.appendChild(element("td", null, row.gpu === null || row.gpu === undefined ||
			row.gpu < 0 ? "–" : row.gpu));
		tr.appendChild(element("td", null, row.turns + (maxTurns ? " / " + maxTurns : "")));
		tr.appendChild(element("td", null, formatCost(row.cost) +
			(maxCost ? " / " + formatCost(maxCost) : "")));
		tr.appendChild(element("td", null, formatSpeedup(row.best)));
		body.appendChild(tr);
	});
	byId("batch-progress").replaceWith(Object.assign(progressBar(batch.counts || {}),
		{id: "batch-progress"}));
}

async function showBatch(id) {
	const batch = await getJson("/v1/batches/" + encodeURIComponent(id));
	viewer.batchId = id;
	viewer.batches.set(id, Object.assign(viewer.batches.get(id) || {}, batch));
	viewer.sessionRows = new Map();
	(batch.sessions || []).forEach(function (session) {
		viewer.sessionRows.set(session.id, sessionRow(session));
	});
	byId("batch-title").textContent = "Batch " + id;
	byId("batch-view").hidden = false;
	byId("empty").hidden = true;
	renderSessionTable();
	renderBatchList();
}

function closeSessionStream() {
	if (viewer.sessionStream) viewer.sessionStream.close();
	viewer.sessionStream = null;
}

async function showSession(id) {
	closeSessionStream();
	const session = await getJson("/v1/sessions/" + encodeURIComponent(id));
	if (session.batch_id && session.batch_id !== viewer.batchId) await showBatch(session.batch_id);
	const model = new SessionModel(id);
	model.state = session.state;
	viewer.session = model;
	viewer.diffChosen = false;
	if (viewer.chart) {
		viewer.chart.destroy();
		viewer.chart = null;
	}
	clear(byId("timeline"));
	clear(byId("diff-from"));
	clear(byId("diff-to"));
	byId("session-title").textContent = "Session " + id;
	byId("session-view").hidden = false;
	renderSessionTable();
	renderSession();
	followSession(model);
}

/* The session's trace, replayed then followed; EventSource resumes with Last-Event-ID after a
 * cut, and the stream's "end" closes it for good. */
function followSession(model) {
	const stream = new EventSource("/v1/sessions/" + encodeURIComponent(model.id) + "/events");
	viewer.sessionStream = stream;
	stream.addEventListener("record", function (event) {
		if (viewer.session !== model) return;
		const record = parseJson(event.data);
		if (!record || (typeof record.seq === "number" && record.seq <= model.lastSeq)) return;
		model.add(record);
		appendTimeline(record);
		renderSession();
	});
	stream.addEventListener("end", function (event) {
		const data = parseJson(event.data) || {};
		stream.close();
		if (viewer.session !== model) return;
		if (data.state) model.state = data.state;
		renderSession();
	});
}

/* ---- the daemon's own stream of changes ---- */

function followDaemon() {
	const stream = new EventSource("/v1/events");
	const status = byId("connection");
	stream.onopen = function () {
		status.textContent = "live";
		status.className = "connection live";
	};
	stream.onerror = function () {
		status.textContent = "reconnecting…";
		status.className = "connection lost";
	};
	stream.addEventListener("batch", function (event) {
		const data = parseJson(event.data);
		if (!data || !data.id) return;
		viewer.batches.set(data.id, Object.assign(viewer.batches.get(data.id) || {}, data));
		renderBatchList();
		refreshHealth();
		if (data.id === viewer.batchId) renderSessionTable();
	});
	stream.addEventListener("session", function (event) {
		const data = parseJson(event.data);
		if (!data || !data.id) return;
		if (!viewer.batches.has(data.batch)) {
			viewer.batches.set(data.batch, {id: data.batch, state: "queued", counts: {}});
			renderBatchList();
		}
		if (data.batch !== viewer.batchId) return;
		viewer.sessionRows.set(data.id, sessionRow(data));
		if (viewer.session && viewer.session.id === data.id) viewer.session.state = data.state;
		renderSessionTable();
		if (viewer.session && viewer.session.id === data.id) renderSession();
	});
}

/* ---- navigation: #/batch/ID, #/session/ID ---- */

async function route() {
	const match = /^#\/(batch|session)\/(.+)$/.exec(location.hash);
	try {
		if (!match) {
			closeSessionStream();
			viewer.session = null;
			byId("session-view").hidden = true;
			return;
		}
		const id = decodeURIComponent(match[2]);
		if (match[1] === "batch") {
			closeSessionStream();
			viewer.session = null;
			byId("session-view").hidden = true;
			await showBatch(id);
		} else {
			await showSession(id);
		}
	} catch (error) {
		showProblem("Cannot show " + location.hash + ": " + error.message);
	}
}

async function showHealth() {
	const health = await getJson("/v1/health");
	byId("health").textContent = "kagentd " + health.version + " · " + health.device + " · " +
		health.sessions_running + " running, " + health.sessions_queued + " queued";
}

/* The header's counts follow the batches' events, at most once a second. */
let healthTimer = null;
function refreshHealth() {
	if (healthTimer !== null) return;
	healthTimer = setTimeout(function () {
		healthTimer = null;
		showHealth().catch(function () {});
	}, 1000);
}

async function start() {
	["diff-from", "diff-to"].forEach(function (id) {
		byId(id).addEventListener("change", function () {
			viewer.diffChosen = true;
			renderDiff();
		});
	});
	window.addEventListener("hashchange", route);
	try {
		await showHealth();
		const list = await getJson("/v1/batches");
		(list.batches || []).forEach(function (batch) { viewer.batches.set(batch.id, batch); });
		renderBatchList();
	} catch (error) {
		showProblem("Cannot reach kagentd: " + error.message);
		return;
	}
	followDaemon();
	await route();
}

document.addEventListener("DOMContentLoaded", start);
