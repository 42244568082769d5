"""What /proc says about processes: a process's threads and seccomp filters, whether a process
group still runs, which processes could do device work the judge's record does not see
(harness.py, judge.py), a process's children and descendants (candidate.py ends
torch.compile's workers with them) and a uid's live processes (worker.py ends them)."""
import os


def process_status(pid):
    """{"threads", "seccomp_filters"} of a process, from /proc (None where unreadable)."""
    result = {"threads": None, "seccomp_filters": None}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key == "Threads":
                    result["threads"] = int(value)
                elif key == "Seccomp_filters":
                    result["seccomp_filters"] = int(value)
    except (OSError, ValueError):
        pass
    return result


def _gpu_holder(pid):
    """Whether a process has a GPU device file open; True where that cannot be read."""
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}").startswith("/dev/nvidia"):
                    return True
            except OSError:
                continue
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command's name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()
    except OSError:
        return None


def group_running(group):
    """Whether a process of this process group still runs (a zombie does not: it has ended
    and only waits for its parent)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
                return True
    return False


def other_processes(known, uid, roots, device):
    """Processes that could do device work the record does not see: on the sandbox uid (when
    the judge runs as it) or below the timed children, other than the known ones; on a GPU
    only those that hold a GPU device file. Returns [(pid, command)]."""
    parents, owners, commands, ended = {}, {}, {}, set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
                for line in handle:
                    key, _, value = line.partition(":")
                    if key == "State" and value.split()[:1] == ["Z"]:
                        # a zombie has ended (a killed compile child's workers, until the
                        # worker reaps them): it can run nothing
                        ended.add(pid)
                    elif key == "PPid":
                        parents[pid] = int(value)
                    elif key == "Uid":
                        owners[pid] = int(value.split()[0])
                    elif key == "Name":
                        commands[pid] = value.strip()
        except (OSError, ValueError):
            continue
    found = []
    for pid in parents:
        if pid in known or pid in ended:
            continue
        ancestor, below = parents.get(pid), False
        for _ in range(64):
            if ancestor in roots:
                below = True
                break
            if ancestor is None or ancestor <= 1:
                break
            ancestor = parents.get(ancestor)
        same_uid = uid is not None and owners.get(pid) == uid and os.getuid() == uid
        if (below or same_uid) and (device != "cuda" or _gpu_holder(pid)):
            found.append((pid, commands.get(pid, "?")))
    return found


def user_processes(uid):
    """The pids of the live (not zombie) processes whose real uid is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as handle:
                fields = dict(line.partition(":")[::2] for line in handle)
        except OSError:
            continue
        if fields.get("State", "").split()[:1] == ["Z"]:
            continue
        owner = fields.get("Uid", "").split()[:1]
        if owner and owner[0].isdigit() and int(owner[0]) == uid:
            found.append(int(entry))
    return found


def children(parent):
    """The pids whose parent is `parent`, zombies included."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and len(fields) > 1 and fields[1] == str(parent):
                found.append(int(entry))
    return found


def descendants(root):
    """Every process below `root` (children, their children...), by pid."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and len(fields) > 1 and fields[1].isdigit():
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, waiting = [], [root]
    while waiting:
        for child in children.get(waiting.pop(), []):
            if child not in found:
                found.append(child)
                waiting.append(child)
    return found
