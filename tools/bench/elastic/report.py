"""The table of tools/bench/elastic/recovery.sh: reads OUT_DIR/machine.txt and results.jsonl
(one JSON object per run, from recovery.py) and prints Markdown: per configuration, the kill to
the survivors' first step and the added host to its worker's first step (median of the runs
that got there, and the range), the failures, and the exact commands.

  python3 report.py OUT_DIR
"""

import json
import os
import statistics
import sys

NAMES = {
    "kolo": "kolo (kolorun elastic, C++ kolo-elastic-train)",
    "kolo-torch": "kolo.torch (examples/pytorch/elastic_train.py)",
    "horovod": "Horovod 0.28.1 elastic (Gloo), defaults",
    "horovod-gloo5": "Horovod 0.28.1 elastic, HOROVOD_GLOO_TIMEOUT_SECONDS=5",
    "torchrun": "torchrun restart, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1",
    "torchrun-shared": "torchrun restart, defaults",
}


def cell(values):
    if not values:
        return "—"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.2f} s"
    return f"{median:.2f} s ({min(values):.2f}–{max(values):.2f})"


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "machine.txt")) as machine:
        print("".join(f"    {line}" for line in machine))
    runs = {}
    with open(os.path.join(out, "results.jsonl")) as results:
        for line in results:
            if line.strip():
                result = json.loads(line)
                runs.setdefault(result["config"], []).append(result)
    print("| system | SIGKILL → survivors' first step | SIGKILL → re-formed | "
          "host added → its worker's first step | runs | failures |")
    print("|---|---|---|---|---|---|")
    for config, results in runs.items():
        def values(key):
            return [r[key] for r in results if key in r]

        failures = [r[key] for r in results for key in ("error", "grow_error") if key in r]
        left = [str(pid) for r in results for key in ("left_running", "grow_left_running")
                for pid in r.get(key, [])]
        if left:
            failures.append("left running: " + " ".join(left))
        print(f"| {NAMES.get(config, config)} | {cell(values('kill_to_step_s'))} | "
              f"{cell(values('kill_to_reformed_s'))} | {cell(values('add_to_step_s'))} | "
              f"{sum('system' in r for r in results)} | {'; '.join(failures) or 'none'} |")
    print()
    print("Each run (kill → first step / host added → first step), in seconds:")
    print()
    for config, results in runs.items():
        pairs = [f"{r['kill_to_step_s']:.2f}" if "kill_to_step_s" in r else "—" for r in results]
        adds = [f"{r['add_to_step_s']:.2f}" if "add_to_step_s" in r else "—" for r in results]
        print(f"- {config}: {', '.join(pairs)} / {', '.join(adds)}")
    print()
    print("Commands (recovery.py's, per run; the discovery script prints its hosts file):")
    print()
    for config, results in runs.items():
        first = results[0]
        if "command" not in first:
            continue
        env = f"{first['env']} " if first.get("env") else ""
        print(f"- {config}: `{env}{first['command']}`")
        if "grow_command" in first:
            print(f"  - growing: `{env}{first['grow_command']}`")


if __name__ == "__main__":
    main()
