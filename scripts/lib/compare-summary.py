"""Summarises scripts/bench-compare's JSON lines: per binary, the median over the pairs
(with the range) of each figure issue 31 names."""
import json
import statistics
import sys
from collections import defaultdict

records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
# (label, figure) -> one value per pair
figures = defaultdict(list)
by_server = defaultdict(list)  # the records of one server's turn, in order
for record in records:
    by_server[(record["label"], record["server"])].append(record)


def pick(turn_records, load, scenario):
    for record in turn_records:
        if record["load"] == load and record["scenario"] == scenario and "put" not in record["name"]:
            return record
    return None


for (label, _), turn_records in by_server.items():
    s2 = pick(turn_records, "s2", "S2")
    s3 = pick(turn_records, "s3-count", "S3")
    s4 = pick(turn_records, "s4", "S4")
    short, long = pick(turn_records, "s5-short", "S5"), pick(turn_records, "s5-long", "S5")
    s8, s3_beside = pick(turn_records, "s8", "S8"), pick(turn_records, "s8", "S3")
    if s2:
        figures[label, "S2 c=1 p50 ms"].append(s2["p50_ms"])
    if s3:
        figures[label, "S3 c=32 runs/s"].append(s3["ops_per_sec"])
        figures[label, "S3 c=32 CPU ms/run (server+db)"].append(s3["cpu_ms"] / s3["ops"])
    if s4:
        figures[label, "S4 c=16 frames/s"].append(s4["frames_per_sec"])
    if short and long:
        searches = long["ops"] - short["ops"]
        figures[label, "S5 c=1 CPU ms/search (server+db)"].append(
            (long["cpu_ms"] - short["cpu_ms"]) / searches)
        figures[label, "S5 c=1 p50 ms"].append(long["p50_ms"])
        figures[label, "S5 c=1 p99 ms"].append(long["p99_ms"])
    if s8 and s3_beside:
        figures[label, "S8 c=32 runs/s"].append(s8["ops_per_sec"])
        figures[label, "S8 / S3"].append(s8["ops_per_sec"] / s3_beside["ops_per_sec"])

names = sorted({name for _, name in figures})
labels = sorted({label for label, _ in figures})
print("| figure | " + " | ".join(labels) + " |")
print("|---|" + "---:|" * len(labels))
for name in names:
    cells = []
    for label in labels:
        values = figures.get((label, name), [])
        if not values:
            cells.append("–")
            continue
        fmt = (lambda v: f"{v:,.0f}") if max(values) >= 100 else (lambda v: f"{v:.3f}")
        cells.append(f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})")
    print(f"| {name} | " + " | ".join(cells) + " |")
