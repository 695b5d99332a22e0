"""Draw the evidence section (analysis/evidence/build.py's JSON form) with rich, for ``attach``,
``analyze`` and ``snapshot``.

Contract: reads only the evidence dict (never /proc); every text taken from processes (paths,
command lines, kernel log lines) is escaped. Findings come first (warnings, then context),
then one line per container the tree runs in (``container_line``), per-process vitals, log
targets and library versions, ports, GPUs, the kernel log, CUDA graph activity, and one line
per datum that could not be gathered and why.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from rich.console import Console
from .markup import escape
from rich.text import Text
from rich.tree import Tree

from ..analysis.evidence.build import human_duration

__all__ = ["render_evidence", "evidence_tree", "human_bytes", "human_age"]

MAX_PROCESSES = 12


def human_bytes(n: Optional[float]) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_age(s: Optional[float]) -> str:
    return "?" if s is None else human_duration(s)


def _t(markup: str) -> Text:
    return Text.from_markup(markup)


def _log_line(e: Dict[str, Any], ref: float) -> str:
    head = f"{escape(e['role'])} → {escape(e.get('path') or '?')}"
    bits = []
    if e.get("size") is not None:
        bits.append(human_bytes(e["size"]))
    if e.get("mtime") is not None:
        verb = "last grew" if e.get("kind") == "file" else "last written"
        bits.append(f"{verb} {human_age(ref - e['mtime'])} ago"
                    + (" (to 8 s)" if e.get("kind") == "tty" else ""))
    if e.get("grew_bytes"):
        bits.append(f"[green]+{human_bytes(e['grew_bytes'])} in the window[/]")
    elif e.get("written_in_window") is False:
        bits.append("[yellow]not written in the window[/]")
    if e.get("why"):
        bits.append(f"[dim]{escape(e['why'])}[/]")
    return head + (", " + ", ".join(bits) if bits else "")


def _lib_text(lib: Dict[str, Any]) -> str:
    v = lib.get("version") or "version unknown"
    detail = lib.get("detail") or ""
    src = f" [dim]({escape(lib['source'])})[/]" if lib.get("source") else ""
    return f"{escape(lib['name'])} {escape(v)}{escape(detail if detail.startswith('+') else '')}" \
        + (f" {escape(detail)}" if detail and not detail.startswith("+") else "") + src


def _process_node(node: Tree, p: Dict[str, Any], ref: float,
                  name: Callable[[int], str]) -> None:
    role = f"[bold]{escape(p['role'])}[/] " if p.get("role") and p["role"] != "other" else ""
    bits = []
    if p.get("age_s") is not None:
        bits.append(f"started {human_age(p['age_s'])} ago")
    if p.get("rss_bytes") is not None:
        bits.append(f"RSS {human_bytes(p['rss_bytes'])}")
    if p.get("cpu_s") is not None:
        cpu = f"CPU {human_age(p['cpu_s'])}"
        if p.get("cpu_window_s") is not None:
            cpu += f" (+{p['cpu_window_s']:.1f} s in the window)"
        bits.append(cpu)
    pn = node.add(_t(f"{role}{escape(name(p['pid']))}: {', '.join(bits)}"))
    for e in p.get("logs") or []:
        pn.add(_t(_log_line(e, ref)))
    if p.get("logs_why"):
        pn.add(_t(f"[dim]logs: {escape(p['logs_why'])}[/]"))
    if p.get("libs"):
        pn.add(_t("libs: " + "; ".join(_lib_text(x) for x in p["libs"])))


MAX_PIDS = 8         # pids named on a container's line; the rest counted


def container_line(c: Dict[str, Any], name: Callable[[int], str]) -> str:
    """One container of the tree: runtime, short id, pod and QoS class, its processes and
    the cgroup they were read from (evidence/containers.py's entry)."""
    runtime = escape(c["runtime"]) if c.get("runtime") else "kubernetes (runtime not in the path)"
    bits = [f"[bold]container[/] {runtime} {escape(c['short'])}"]
    if c.get("pod_uid"):
        bits.append(f", pod {escape(c['pod_uid'])}"
                    + (f" (QoS {escape(c['qos'])})" if c.get("qos") else ""))
    pids = c.get("pids") or []
    shown = ", ".join(name(p) for p in pids[:MAX_PIDS]) + \
        (f" and {len(pids) - MAX_PIDS} more" if len(pids) > MAX_PIDS else "")
    bits.append(f": {len(pids)} process{'es' if len(pids) != 1 else ''} ({escape(shown)})")
    bits.append(f" [dim](cgroup v{c.get('version', 2)} {escape(c.get('cgroup') or '?')})[/]")
    return "".join(bits)


def _gpu_line(g: Dict[str, Any]) -> str:
    head = f"GPU {g['gpu']}" + (f" {escape(g['name'])}" if g.get("name") else "") \
        + (f" [dim]({escape(g['pci_bus'])})[/]" if g.get("pci_bus") else "")
    bits = []
    if g.get("util_pct") is not None:
        bits.append(f"util {g['util_pct']:.0f}%")
    if g.get("power_w") is not None:
        lim = f" of {g['power_limit_w']:.0f} W" if g.get("power_limit_w") else ""
        bits.append(f"{g['power_w']:.0f} W{lim}")
    if g.get("sm_clock_mhz") is not None:
        mx = f"/{g['sm_clock_max_mhz']}" if g.get("sm_clock_max_mhz") else ""
        bits.append(f"SM {g['sm_clock_mhz']:.0f}{mx} MHz")
    if g.get("temperature_c") is not None:
        bits.append(f"{g['temperature_c']} °C")
    if "throttle" in g:
        bits.append("clock events: " + (", ".join(g["throttle"]) or "none"))
    if g.get("ecc_uncorrected") is not None or g.get("ecc_corrected") is not None:
        bits.append(f"ECC {g.get('ecc_corrected', '?')} corrected / "
                    f"{g.get('ecc_uncorrected', '?')} uncorrected")
    if g.get("remapped_corr") is not None:
        bits.append(f"remapped rows {g['remapped_corr']}/{g.get('remapped_unc')}"
                    + (" [yellow](pending)[/]" if g.get("remap_pending") else ""))
    if g.get("retired_sbe") is not None:
        bits.append(f"retired pages {g['retired_sbe']}+{g.get('retired_dbe')}")
    if g.get("pcie_replays") is not None:
        d = g.get("pcie_replays_window")
        bits.append(f"PCIe replays {g['pcie_replays']}" + (f" (+{d})" if d is not None else ""))
    return head + ": " + ", ".join(bits)


def _processes_line(procs: List[Dict[str, Any]], ref: float) -> str:
    """The processes' vitals in one line: how many, their age and RSS, who used the CPU."""
    ages = [p["age_s"] for p in procs if p.get("age_s") is not None]
    rss = [p["rss_bytes"] for p in procs if p.get("rss_bytes") is not None]
    busy = sorted((p for p in procs if (p.get("cpu_window_s") or 0) >= 0.05),
                  key=lambda p: -p["cpu_window_s"])
    bits = [f"{len(procs)}"]
    if ages:
        bits.append(f"started {human_age(min(ages))} to {human_age(max(ages))} ago")
    if rss:
        bits.append(f"RSS {human_bytes(min(rss))} to {human_bytes(max(rss))}")
    cpu = ", ".join(f"{escape(p.get('role') or 'pid')} pid {p['pid']} +{p['cpu_window_s']:.1f} s"
                    for p in busy[:3])
    bits.append(f"CPU in the window: {cpu}" + (f" and {len(busy) - 3} more" if len(busy) > 3
                                                else "") if busy else "no CPU in the window")
    return "[bold]processes[/]: " + ", ".join(bits)


def _logs_line(procs: List[Dict[str, Any]], ref: float) -> Optional[str]:
    """Every process's log targets in one line: each target once, with the streams and the
    number of processes writing to it, and whether it was written in the window."""
    targets: Dict[str, Dict[str, Any]] = {}
    for p in procs:
        for e in p.get("logs") or []:
            t = targets.setdefault(e.get("path") or "?", {"roles": [], "pids": set(), "e": e,
                                                         "grew": 0})
            if e["role"] not in t["roles"]:
                t["roles"].append(e["role"])
            t["pids"].add(p["pid"])
            t["grew"] = max(t["grew"], e.get("grew_bytes") or 0)
    if not targets:
        return None
    parts = []
    for path, t in targets.items():
        n = len(t["pids"])
        state = (f"[green]+{human_bytes(t['grew'])} in the window[/]" if t["grew"] else
                 "[yellow]not written in the window[/]"
                 if t["e"].get("written_in_window") is False else "")
        parts.append(f"{escape('/'.join(t['roles']))} → {escape(path)} ({n} process"
                     f"{'es' if n != 1 else ''})" + (f": {state}" if state else ""))
    return "[bold]logs[/]: " + "; ".join(parts)


def _libs_line(procs: List[Dict[str, Any]]) -> Optional[str]:
    seen: List[str] = []
    for p in procs:
        for lib in p.get("libs") or []:
            text = _lib_text(lib)
            if text not in seen:
                seen.append(text)
    return "[bold]libs[/]: " + "; ".join(seen) if seen else None


def _compact_processes(top: Tree, procs: List[Dict[str, Any]], ref: float) -> None:
    """One line per kind (issue 43): the processes' vitals, their logs, their libraries."""
    for line in (_processes_line(procs, ref), _logs_line(procs, ref), _libs_line(procs)):
        if line:
            top.add(_t(line))


def _compact_missing(top: Tree, missing: List[Dict[str, Any]],
                     name: Callable[[int], str]) -> None:
    """What could not be gathered, one line per datum and reason, its processes as ranges."""
    from .fold import number_ranges
    groups: Dict[Any, List[int]] = {}
    for m in missing:
        groups.setdefault((m["what"], m["why"]), []).extend([m["pid"]] if m.get("pid") else [])
    for (what, why), pids in groups.items():
        who = "" if not pids else f" ({escape(name(pids[0]))})" if len(pids) == 1 else \
            f" (pids {number_ranges(pids)})"
        top.add(_t(f"[dim]not gathered: {escape(what)}{who}: {escape(why)}[/]"))


def evidence_tree(ev: Optional[Dict[str, Any]], verbose: bool = False,
                  pid_text: Optional[Callable[[int], str]] = None,
                  compact: bool = False) -> Optional[Tree]:
    """The evidence section as a rich Tree, None when there is none. ``pid_text`` names a
    pid ("pid 42"; in a merged report, "pid 42 on node b" for its key). ``compact`` (the
    report's default view): one line per kind of evidence (the processes' vitals, their logs,
    their libraries, the ports, the GPUs, each datum not gathered)."""
    if not ev:
        return None
    name = pid_text or (lambda p: f"pid {p}")
    ref = ev.get("ref_ts") or time.time()
    top = Tree(_t("[bold]evidence[/] [dim](what one checks by hand)[/]"), guide_style="dim")
    for f in ev.get("findings") or []:
        style = "bold yellow" if f["severity"] == "warn" else "cyan"
        top.add(_t(f"[{style}]{escape(f['rule'])}[/]: {escape(f['text'])} "
                   f"[dim]({escape(f.get('source') or '')})[/]"))
    for c in ev.get("containers") or []:
        top.add(_t(container_line(c, name)))
    procs = ev.get("processes") or []
    if procs and compact:
        _compact_processes(top, procs, ref)
    elif procs:
        pn = top.add(_t("[bold]processes[/]"))
        shown = procs if verbose else procs[:MAX_PROCESSES]
        for p in shown:
            _process_node(pn, p, ref, name)
        if len(procs) > len(shown):
            pn.add(_t(f"[dim]… {len(procs) - len(shown)} more (--verbose or --json)[/]"))
    ports = ev.get("ports") or {}
    listening = ports.get("listening") or []
    most = 3 if compact else 8
    more = f" and {len(listening) - most} more" if compact and len(listening) > most else ""
    pl = top.add(_t("[bold]ports[/]: " + (", ".join(
        f"{escape(x['socket'])} ({escape(name(x['pid']))})" for x in listening[:most]) + more
        if listening else "[yellow]nothing in the tree listens[/]")))
    for a in ports.get("asked") or []:
        ok = "[green]listened on[/]" if a["listened_by"] else \
            ("[yellow]not listened on[/]" if a["local"] else "[dim]a peer's address[/]")
        pl.add(_t(f"asked: {escape(a['option'])} {a['port']} "
                  f"({escape(', '.join(name(p) for p in a['pids']))}): {ok}"))
    gpus = ev.get("gpus") or []
    if gpus and compact:
        top.add(_t("[bold]GPUs[/] [dim](NVML)[/]: " + "; ".join(_gpu_line(g) for g in gpus)))
    elif gpus:
        gn = top.add(_t("[bold]GPUs[/] [dim](NVML)[/]"))
        for g in gpus:
            gn.add(_t(_gpu_line(g)))
    k = ev.get("kernel_log") or {}
    if k and not k.get("why", "").startswith(("no ", "cannot")):
        xids = k.get("xids") or []
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(k["since"])) \
            if k.get("since") else "boot"
        top.add(_t(f"[bold]kernel log[/] [dim]({escape(k.get('source', ''))}, "
                   f"{k.get('scanned', 0)} records)[/]: "
                   + (f"[bold red]{len(xids)} NVRM Xid lines[/]" if xids else
                      f"no NVRM Xid since {since}")))
    for host in ev.get("host") or []:
        top.add(_t(f"host: {_lib_text(host)}"))
    calls = ev.get("graph_calls") or []
    if calls:
        cn = top.add(_t("[bold]CUDA driver calls[/] [dim](uprobes on libcuda)[/]"))
        for c in calls:
            text = (f"{escape(name(c['pid']))} tid {c['tid']}: {c['begins']} captures begun, "
                    f"{c['ends']} ended, {c['launches']} graph launches")
            if "kernels" in c:
                text += (f", {c['kernels']} kernels, {c['copies']} copies, {c['syncs']} syncs "
                         f"({c['syncs_done']} returned), {c['queries_ready']} queries ready of "
                         f"{c['queries_ready'] + c['queries_not_ready']}")
                if c.get("in_sync_since") is not None:
                    text += f", in a sync for {c['until'] - c['in_sync_since']:.1f} s at the end"
            if "collectives" in c:
                text += f"; NCCL: {c['collectives']} collectives"
                text += f", last call {escape(c['last_op'])}" if c.get("last_op") else ""
                if c.get("in_nccl_since") is not None:
                    text += f", inside it for {c['until'] - c['in_nccl_since']:.1f} s at the end"
            cn.add(_t(text))
    if compact:
        _compact_missing(top, ev.get("missing") or [], name)
    for m in [] if compact else ev.get("missing") or []:
        who = f" ({escape(name(m['pid']))})" if m.get("pid") else ""
        top.add(_t(f"[dim]not gathered: {escape(m['what'])}{who}: {escape(m['why'])}[/]"))
    if not ev.get("recorded", True):
        top.add(_t("[dim]this trace has no evidence records (an imported log, or recorded "
                   "before hangtrace gathered them): ports come from its process table only[/]"))
    return top


def render_evidence(ev: Optional[Dict[str, Any]], console: Console,
                    verbose: bool = False,
                    pid_text: Optional[Callable[[int], str]] = None) -> None:
    tree = evidence_tree(ev, verbose, pid_text)
    if tree is not None:
        console.print(tree)


def findings_of(ev: Optional[Dict[str, Any]], severity: str = "warn") -> List[Dict[str, Any]]:
    return [f for f in (ev or {}).get("findings") or [] if f.get("severity") == severity]
