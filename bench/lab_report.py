"""The latency lab's outputs: latency.json (one row per tool, scenario, protocol and RTT), latency.md
(tables and notes) and latency.png (time against round-trip time, log scale)."""

from __future__ import annotations

import json
import math
import shlex
import shutil
import sys
import time
from pathlib import Path

PROTOCOL_NAMES = {"http": "http://", "root": "root://", "file": "local"}


def cell(row: dict | None) -> str:
    """Seconds for a table cell; '> budget (x %)' when stopped, '—' when skipped after an earlier stop."""
    if row is None:
        return ""
    if row["status"] == "ok":
        s = row["seconds"]
        text = f"{s:.2f}" if s < 100 else f"{s:.0f}"
        return text + ("" if row.get("verified", True) else " ✗")
    if row["status"] == "timeout":
        done = row.get("done_fraction")
        return f"> {row['budget_seconds']:g}" + (f" ({100 * done:.0f} %)" if done is not None and done < 1 else "")
    if row["status"] == "skipped":
        return "—"
    return "error"


def mb(x) -> str:
    return "" if x is None else f"{x / 1e6:.1f}"


def num(x) -> str:
    return "" if x is None else f"{x:,.0f}"


def markdown_tables(rows: list[dict], scenarios: dict, rtts: list[float]) -> list[str]:
    out = []
    by_key = {(r["tool"], r["scenario"], r["protocol"], r["rtt_ms"]): r for r in rows}
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    protocols = [p for p in ("http", "root") if any(r["protocol"] == p for r in rows)]
    has_local = any(r["protocol"] == "file" for r in rows)
    for scenario, description in scenarios.items():
        if not any(r["scenario"] == scenario for r in rows):
            continue
        out.append(f"### {scenario}: {description}\n")
        header = ["tool", "protocol"] + (["local"] if has_local else []) + [f"{rtt:g} ms" for rtt in rtts]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * 2 + "---:|" * (len(header) - 2))
        for tool in tools:
            for protocol in protocols:
                cells = [by_key.get((tool, scenario, protocol, rtt)) for rtt in rtts]
                if not any(cells):
                    continue
                local = [cell(by_key.get((tool, scenario, "file", 0)))] if has_local else []
                out.append("| " + " | ".join([tool, PROTOCOL_NAMES[protocol]] + local + [cell(c) for c in cells]) + " |")
        out.append("")
    return out


def cost_table(rows: list[dict], rtt: float) -> list[str]:
    out = [
        f"### What each read cost at {rtt:g} ms\n",
        "| scenario | tool | protocol | seconds | requests | round trips | MB read | peak RSS (MB) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["rtt_ms"] != rtt or r["protocol"] == "file" or r["requests"] is None:
            continue
        out.append(
            f"| {r['scenario']} | {r['tool']} | {PROTOCOL_NAMES[r['protocol']]} | {cell(r)} | {num(r['requests'])} | "
            f"{num(r['round_trips']) or 'n/a'} | {mb(r['bytes'])} | {mb(r['peak_rss'])} |"
        )
    out.append("")
    out.append(
        "Requests: cherenkov's source counters (requests on the wire; round trips = requests that waited for "
        "one another), ROOT's TFile::GetReadCalls, uproot's Source.num_requests; MB read: bytes requested "
        "(ROOT: TFile::GetBytesRead). Peak RSS includes the tool's imports (ROOT's alone is about 450 MB).\n"
    )
    return out


# Round trips of connecting that the source counters leave out and the lab delays: XRootD's login
# (which carries the open). toxiproxy delays data, not TCP's handshake (a real WAN adds one RTT per
# connection); HTTP's first request is counted already (it reads data).
CONNECT_ROUND_TRIPS = {"http": 0, "root": 1}
# Round trips any reader waits for per file: HTTP metadata and data; XRootD login+open first.
FORCED_ROUND_TRIPS = {"http": 2, "root": 3}


def latency_cost_table(rows: list[dict], rtt: float) -> list[str]:
    """What the distance costs cherenkov: its time at `rtt` against its own local time, the
    difference in round-trip times, and the round trips it waited for (nothing without distance)."""
    if rtt <= 0:
        return []
    by_key = {(r["tool"], r["scenario"], r["protocol"], r["rtt_ms"]): r for r in rows}
    out = [
        f"### What {rtt:g} ms of distance costs cherenkov\n",
        "| scenario | protocol | local | remote | remote / local | remote − local | in RTTs | round trips |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        local = by_key.get((r["tool"], r["scenario"], "file", 0))
        if (
            r["tool"] != "cherenkov"
            or r["rtt_ms"] != rtt
            or r["protocol"] == "file"
            or r["status"] != "ok"
            or r["round_trips"] is None
            or not local
            or local["status"] != "ok"
        ):
            continue
        extra = r["seconds"] - local["seconds"]
        files = len(r.get("file_seconds") or [None])  # lazy reads a dataset of two files
        trips = r["round_trips"] + files * CONNECT_ROUND_TRIPS[r["protocol"]]
        out.append(
            f"| {r['scenario']} | {PROTOCOL_NAMES[r['protocol']]} | {local['seconds']:.2f} | {r['seconds']:.2f} | "
            f"{r['seconds'] / local['seconds']:.1f}x | {extra:.2f} | {extra / (rtt / 1000):.1f} | {trips:g} |"
        )
    out.append("")
    out.append(
        "Round trips: the sequential waits of the byte source, plus XRootD's login (which carries the open); "
        "toxiproxy does not delay TCP's handshake, which a real WAN adds once per connection. Prefetched "
        "round trips overlap with decompression and use. Any reader needs at least 2 round trips before its "
        "first data (metadata, then data) over HTTP, 3 over XRootD (login and open first).\n"
    )
    return out if len(out) > 5 else []


def lazy_table(rows: list[dict]) -> list[str]:
    lazy = [r for r in rows if r["scenario"] == "lazy" and r.get("file_seconds") and r["protocol"] != "file"]
    if not lazy:
        return []
    rtt = max(r["rtt_ms"] for r in lazy)
    out = [
        f"### lazy: first and second file of the dataset at {rtt:g} ms (seconds)\n",
        "| tool | protocol | first file | second file |",
        "|---|---|---:|---:|",
    ]
    for r in lazy:
        if r["rtt_ms"] == rtt:
            a, b = r["file_seconds"][:2]
            out.append(f"| {r['tool']} | {PROTOCOL_NAMES[r['protocol']]} | {a:.2f} | {b:.2f} |")
    out.append("")
    return out


def checks_text(rows: list[dict]) -> list[str]:
    measured = [r for r in rows if r["status"] == "ok" or r.get("verified") is not None]
    bad = [r for r in measured if r.get("verified") is False]
    if not bad:
        return [
            f"**Checked:** all {len(measured)} measurements read the same values as cherenkov's local read of the "
            "same scenario (bytes of values as ROOT's GetEntry counts them, and the sums and numbers of values of "
            "a few branches; the interactive scenario compares sums and counts).\n"
        ]
    out = [f"**Check failed** for {len(bad)} of {len(measured)} measurements (✗ in the tables):\n"]
    for r in bad:
        out.append(f"- {r['tool']}, {r['scenario']}, {r['protocol']} {r['rtt_ms']:g} ms: {'; '.join(r['problems'])}")
    out.append("")
    return out


def replay_markdown(table: dict | None) -> list[str]:
    if not table:
        return []
    from replay import markdown

    return [markdown(table), ""]


def plot(rows: list[dict], scenarios: dict, path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    present = [s for s in scenarios if any(r["scenario"] == s and r["protocol"] != "file" for r in rows)]
    if not present:
        return False
    cols = 2 if len(present) > 1 else 1
    nrows = (len(present) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 4.6 * nrows), squeeze=False)
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    colors = {t: plt.get_cmap("tab10")(i % 10) for i, t in enumerate(tools)}
    styles = {"http": "-", "root": "--"}
    from matplotlib.ticker import FuncFormatter

    span = max((r["rtt_ms"] for r in rows), default=1) or 1
    for ax, scenario in zip(axes.flat, present):
        lines = [(t, p) for t in tools for p in ("http", "root")]
        for k, (tool, protocol) in enumerate(lines):
            series = sorted(
                (r for r in rows if r["tool"] == tool and r["scenario"] == scenario and r["protocol"] == protocol),
                key=lambda r: r["rtt_ms"],
            )
            ok = [(r["rtt_ms"], r["seconds"]) for r in series if r["status"] == "ok"]
            stopped = [(r["rtt_ms"], r["budget_seconds"]) for r in series if r["status"] == "timeout"]
            if not ok and not stopped:
                continue
            label = f"{tool} ({PROTOCOL_NAMES[protocol]})"
            if ok:
                ax.plot(*zip(*ok), styles[protocol], marker="o", ms=4, color=colors[tool], label=label)
                label = None
            if stopped:  # a lower bound: offset a little so that several tools' markers stay visible
                x, y = stopped[0]
                x += (k - len(lines) / 2) * span / 250
                if ok:
                    ax.plot([ok[-1][0], x], [ok[-1][1], y], ":", color=colors[tool], linewidth=1)
                ax.plot([x], [y], linestyle="none", marker="^", ms=8, color=colors[tool], label=label)
        local = [
            r for r in rows if r["scenario"] == scenario and r["protocol"] == "file" and r["tool"] == "cherenkov" and r["status"] == "ok"
        ]
        if local:
            ax.axhline(local[0]["seconds"], color=colors.get("cherenkov", "k"), linestyle=":", linewidth=1, label="cherenkov, local file")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(
            FuncFormatter(lambda v, _: f"{v:g}" if v > 0 and round(v / 10 ** math.floor(math.log10(v))) in (2, 5) else "")
        )
        ax.set_xlabel("round-trip time (ms)")
        ax.set_ylabel("seconds")
        ax.set_title(scenario)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(present) :]:
        ax.axis("off")
    fig.suptitle(title + "  (▲: stopped at the time budget)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def floor_table(rows: list[dict], rtt: float) -> list[str]:
    """Every tool at `rtt` against the local read (cherenkov's, of the same scenario) and the
    floor: the local read plus the round trips physics forces before the first data (2 over HTTP, 3
    over XRootD); a dataset's later files can be opened while the first is read."""
    if rtt <= 0:
        return []
    local = {r["scenario"]: r for r in rows if r["tool"] == "cherenkov" and r["protocol"] == "file" and r["status"] == "ok"}
    out = [
        f"### Against the local read and the floor at {rtt:g} ms\n",
        "| scenario | tool | protocol | local | floor | remote | remote / local | remote / floor |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = local.get(r["scenario"])
        if r["rtt_ms"] != rtt or r["protocol"] == "file" or r["status"] != "ok" or not base:
            continue
        floor = base["seconds"] + FORCED_ROUND_TRIPS[r["protocol"]] * rtt / 1000
        out.append(
            f"| {r['scenario']} | {r['tool']} | {PROTOCOL_NAMES[r['protocol']]} | {base['seconds']:.2f} | {floor:.2f} | "
            f"{r['seconds']:.2f} | {r['seconds'] / base['seconds']:.1f}x | {r['seconds'] / floor:.2f}x |"
        )
    out += [
        "",
        "Local: cherenkov reading the local file; floor: local plus the round trips any reader waits for "
        "before its first data (HTTP: metadata, data; XRootD: login and open, metadata, data); a dataset's "
        "later files can open while the first is read.\n",
    ]
    return out if len(out) > 5 else []


def speculation_table(rows: list[dict], rtt: float) -> list[str]:
    """What cherenkov fetched on a guess at `rtt` (issue 20's budget: wasted bytes within 20 % of the
    basket bytes read), from the first repetition's counters."""
    out = [
        f"### Speculation at {rtt:g} ms\n",
        "| scenario | tool | protocol | basket MB | fetched on a guess (MB) | used (MB) | wasted (MB) | wasted / basket bytes |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        extra = r.get("extra") or {}
        basket = extra.get("compressed_bytes")
        if r["rtt_ms"] != rtt or r["status"] != "ok" or "speculative_bytes" not in extra or not basket:
            continue
        guessed, wasted = extra["speculative_bytes"], extra["speculative_wasted_bytes"]
        used = extra.get("speculative_used_bytes", guessed - wasted)
        out.append(
            f"| {r['scenario']} | {r['tool']} | {PROTOCOL_NAMES[r['protocol']]} | {mb(basket)} | {mb(guessed)} | {mb(used)} | "
            f"{mb(wasted)} | {100 * wasted / basket:.1f} % |"
        )
    return out + [""] if len(out) > 3 else []


def write_outputs(
    rows,
    notes,
    config,
    plan,
    scenarios,
    out: Path,
    publish_to: Path | None,
    replay_table=None,
    multi_source_table=None,
    stem: str = "latency",
) -> str:
    out.mkdir(parents=True, exist_ok=True)
    rtts = sorted(config.rtts)
    command = "python bench/lab.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [
        "# Latency lab results",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, `{command.strip()}` (`make bench` runs the full lab).",
        "",
        "Seconds, medians of interleaved runs, from opening the file to the last value in memory; the servers "
        "(xrootd, nginx) run on 127.0.0.1 behind toxiproxy, which adds the round-trip time; `local` reads the "
        "file from the disk (page cache warm).",
        "",
        f"![time against round-trip time]({stem}.png)",
        "",
    ]
    lines += markdown_tables(rows, {s: d for s, d in scenarios.items() if s in config.scenarios}, rtts)
    cost_rtt = 137 if 137 in rtts else max(rtts)
    lines += cost_table(rows, cost_rtt)
    lines += latency_cost_table(rows, cost_rtt)
    lines += floor_table(rows, cost_rtt)
    lines += speculation_table(rows, cost_rtt)
    lines += lazy_table(rows)
    lines += checks_text(rows)
    lines += replay_markdown(replay_table)
    if multi_source_table:
        from multi_source import write

        lines += [write(multi_source_table, out)]
    lines += ["### Notes", ""] + [f"- **{k}**: {v}" for k, v in notes.items()] + [""]
    text = "\n".join(lines)
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / f"{stem}.md").write_text(text)
    plotted = plot(
        rows,
        scenarios,
        out / f"{stem}.png",
        f"{plan.files[0].name}: {len(plan.fixed)}-branch fixed set of {len(plan.fixed) + len(plan.others)}",
    )
    if publish_to is not None:
        publish_to.mkdir(parents=True, exist_ok=True)
        names = (f"{stem}.json", f"{stem}.md") + ((f"{stem}.png",) if plotted else ())
        for name in names + (("multi_source.json", "multi_source.md") if multi_source_table else ()):
            shutil.copyfile(out / name, publish_to / name)
    written = [str(out / n) for n in (f"{stem}.json", f"{stem}.md")] + ([str(out / f"{stem}.png")] if plotted else [])
    tail = f"\nwritten: {', '.join(written)}" + (f"; published to {publish_to}" if publish_to else "")
    return text + tail


def main(argv: list[str] | None = None) -> int:
    """Redraw the plot from a latency.json: python bench/lab_report.py bench/results/latency.json [out.png]"""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(main.__doc__)
        return 2
    source = Path(args[0])
    rows = json.loads(source.read_text())
    scenarios = dict.fromkeys(r["scenario"] for r in rows)
    target = Path(args[1]) if len(args) > 1 else source.with_suffix(".png")
    title = f"{source.parent.name}/{source.name}"
    if not plot(rows, {s: s for s in scenarios}, target, title):
        print("matplotlib is not installed, or there is nothing to plot")
        return 1
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
