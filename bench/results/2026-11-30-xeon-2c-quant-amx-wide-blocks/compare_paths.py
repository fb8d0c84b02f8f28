#!/usr/bin/env python3
"""The INT8 tiles (+amx) against the AMX-BF16 prefill path (+amxbf16) per linear, from
bench_linear_quant output: GFLOP/s of each and their ratio, as a Markdown table.

usage: compare_paths.py BENCH_LINEAR_QUANT_OUTPUT"""
import sys

rates = {}
with open(sys.argv[1]) as f:
    for line in f:
        fields = line.split()
        # M >= 64 rows: op kind M N K W-MB us cpu-us GB/s GFLOP/s %peak cpu% ...
        if len(fields) > 10 and fields[0] in ("up", "down") and "+amx" in fields[1]:
            kind, path = fields[1].split("+")
            rates[fields[0], kind, int(fields[2]), path] = float(fields[9])
print("| op | weights | M = 64 | M = 128 | M = 512 |\n|---|---|---|---|---|")
for op in ("up", "down"):
    for kind in ("w8", "w8g128", "w4g128", "w4g128z", "w8g32"):
        cells = []
        for m in (64, 128, 512):
            int8, bf16 = rates[op, kind, m, "amx"], rates[op, kind, m, "amxbf16"]
            cells.append("%.0f / %.0f (%.2fx)" % (int8, bf16, int8 / bf16))
        print("| %s | %s | %s |" % (op, kind, " | ".join(cells)))
