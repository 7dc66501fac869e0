# CTest entries for smol-bench (included by tests/CMakeLists.txt): a short run on the
# tiny fixture whose JSON report must parse and list the expected tests, and the exit
# status of bad command lines. Speeds are never checked: the machines are shared.
#
# tests/ is configured before bench/, so `if(TARGET smol-bench)` would always be false
# here; the option that adds bench/ is the reliable guard ($<TARGET_FILE:...> resolves
# later, at generation time).
if(NOT SMOL_BUILD_BENCH)
  return()
endif()
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "smol: no python3, skipping the smol-bench tests")
  return()
endif()

set(bench_model "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
set(bench_report "${CMAKE_CURRENT_BINARY_DIR}/data/smol-bench.json")

# argv: smol-bench, model, report path. json.tool first, as a user would check it;
# then the contents.
set(smol_bench_json_check [=[
import json, subprocess, sys
tool, model, report = sys.argv[1:4]
with open(report, "w") as out:
    subprocess.run([tool, "-m", model, "-p", "16", "-n", "8", "-d", "0,8", "-r", "1", "-o", "json"],
                   stdout=out, check=True)
subprocess.run([sys.executable, "-m", "json.tool", report], stdout=subprocess.DEVNULL, check=True)
data = json.load(open(report))
names = [t["test"] for t in data["tests"]]
expected = ["pp16", "tg8", "pp16 @ d8", "tg8 @ d8"]
if names != expected:
    sys.exit("tests %s, expected %s" % (names, expected))
for t in data["tests"]:
    if len(t["samples_ts"]) != 1 or not t["avg_ts"] > 0 or not t["isa"]:
        sys.exit("bad samples in %s" % t)
    if t["n_gen"] and not (t["ceiling_ts"] > 0 and t["bytes_per_token"] > 0):
        sys.exit("decode test without a roofline: %s" % t)
if not (data["peak_rss_bytes"] > 0 and data["memory_read"][0]["gbps"] > 0):
    sys.exit("no peak RSS or memory bandwidth in the report")
if data["model_n_params"] <= 0 or not data["model_type"].startswith("smollm3"):
    sys.exit("model fields wrong: %s %s" % (data["model_type"], data["model_n_params"]))
for mode, repacked in (("on", True), ("off", False)):
    run = json.loads(subprocess.run([tool, "-m", model, "-p", "4", "-n", "4", "-r", "1", "-o", "json",
                                     "--repack", mode], capture_output=True, check=True).stdout)
    if [t["isa"].endswith("+repack") for t in run["tests"]] != [repacked, repacked]:
        sys.exit("--repack %s: isa column %s" % (mode, [t["isa"] for t in run["tests"]]))
# --alternate-depth-0: one depth-0 sample beside each repetition at a depth, none at 0.
run = json.loads(subprocess.run([tool, "-m", model, "-p", "0", "-n", "4", "-d", "0,8", "-r", "2",
                                 "-o", "json", "--alternate-depth-0"],
                                capture_output=True, check=True).stdout)
shallow, deep = run["tests"]
if "depth0_samples_ts" in shallow or len(deep.get("depth0_samples_ts", [])) != 2 \
        or not all(r > 0 for r in deep["depth0_samples_ts"]) \
        or len(deep.get("vs_depth0_samples", [])) != 2 or not deep["vs_depth0"] > 0:
    sys.exit("--alternate-depth-0: %s" % run["tests"])
print("smol-bench report ok:", ", ".join(names))
]=])
add_test(NAME bench_smol_bench_json
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_json_check}" $<TARGET_FILE:smol-bench>
                 "${bench_model}" "${bench_report}")
# It reads a 1 GiB buffer for the roofline; keep it from competing with itself.
set_tests_properties(bench_smol_bench_json PROPERTIES RUN_SERIAL TRUE)

# The roofline's bytes per token on the sixteen-row copies (Q4_1 here) are the copy's,
# about the file's rows: with and without the copy within 2 % (they were once counted as
# eight-row Q6_K groups, 30 % more on this fixture).
set(smol_bench_copy_bytes_check [=[
import json, subprocess, sys
tool, model = sys.argv[1:3]
per_token = {}
for mode in ("on", "off"):
    run = json.loads(subprocess.run([tool, "-m", model, "-p", "0", "-n", "2", "-r", "1", "-o", "json",
                                     "--repack", mode], capture_output=True, check=True).stdout)
    per_token[mode] = run["tests"][0]["bytes_per_token"]
if not abs(per_token["on"] / per_token["off"] - 1) < 0.02:
    sys.exit("bytes per token with the copy %d, without %d" % (per_token["on"], per_token["off"]))
print("bytes per token with and without the copy:", per_token)
]=])
add_test(NAME bench_smol_bench_copy_bytes
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_copy_bytes_check}" $<TARGET_FILE:smol-bench>
                 "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_1.gguf")
set_tests_properties(bench_smol_bench_copy_bytes PROPERTIES RUN_SERIAL TRUE)

# argv: smol-bench, expected exit status, arguments...; one line on stderr, nothing
# on stdout.
set(smol_bench_exit_check [=[
import subprocess, sys
tool, expected = sys.argv[1], int(sys.argv[2])
run = subprocess.run([tool] + sys.argv[3:], capture_output=True, text=True)
lines = run.stderr.strip().splitlines()
if run.returncode != expected or len(lines) != 1 or not lines[0].startswith("smol-bench: ") or run.stdout:
    sys.exit("exit %d (expected %d), stderr %r, stdout %r" %
             (run.returncode, expected, run.stderr, run.stdout))
print(lines[0])
]=])
add_test(NAME bench_smol_bench_bad_flag
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 2
                 -m "${bench_model}" --no-such-flag)
add_test(NAME bench_smol_bench_bad_repack
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 2
                 -m "${bench_model}" --repack sometimes)
add_test(NAME bench_smol_bench_bad_count
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 2
                 -m "${bench_model}" -p 16,x)
add_test(NAME bench_smol_bench_missing_file
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 1
                 -m "${CMAKE_CURRENT_BINARY_DIR}/data/no-such-model.gguf")

# --json-schema / --grammar-file: the grammar rows beside the normal ones (never the
# times, which depend on the machine), in the JSON report and in the markdown table.
set(smol_bench_grammar_check [=[
import json, subprocess, sys
tool, model, schema, gbnf = sys.argv[1:5]
run = subprocess.run([tool, "-m", model, "-p", "0", "-n", "16", "-r", "1", "-o", "json",
                      "--json-schema", schema], capture_output=True, text=True, check=True)
data = json.loads(run.stdout)
if [t["test"] for t in data["tests"]] != ["tg16"]:
    sys.exit("normal rows missing: %s" % data["tests"])
rows = data.get("grammar", [])
if len(rows) != 1 or rows[0]["n_gen"] != 16 or not data["grammar_source"].startswith("--json-schema"):
    sys.exit("grammar rows: %s" % rows)
row = rows[0]
for key in ("plain_samples_ts", "grammar_samples_ts", "grammar_vs_plain_samples"):
    if len(row[key]) != 1 or not row[key][0] > 0:
        sys.exit("%s: %s" % (key, row))
for key in ("grammar_vs_plain", "mask_build_us_median", "mask_build_us_p90", "cold_mask_build_us_median"):
    if not row[key] >= 0:
        sys.exit("%s: %s" % (key, row))
if row["refusals"] != 0 or data["grammar_vocabulary"] <= 0:
    sys.exit("refused tokens or no vocabulary: %s" % row)
run = subprocess.run([tool, "-m", model, "-p", "0", "-n", "16", "-r", "1", "--grammar-file", gbnf],
                     capture_output=True, text=True, check=True)
if "grammar --grammar-file" not in run.stdout or "grammar/plain" not in run.stdout \
        or "| tg16 |" not in run.stdout:
    sys.exit("markdown grammar table missing:\n" + run.stdout)
print("smol-bench grammar rows ok")
]=])
add_test(NAME bench_smol_bench_grammar
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_grammar_check}" $<TARGET_FILE:smol-bench>
                 "${bench_model}" "${PROJECT_SOURCE_DIR}/bench/schemas/order.json"
                 "${PROJECT_SOURCE_DIR}/bench/schemas/list.gbnf")
set_tests_properties(bench_smol_bench_grammar PROPERTIES RUN_SERIAL TRUE)
# A schema keyword the converter refuses, a GBNF syntax error, a missing file: exit 1
# before the model loads; both flags at once: exit 2.
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/data/bad-schema.json"
     "{\"type\": \"object\", \"unevaluatedProperties\": false}\n")
file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/data/bad-grammar.gbnf" "root ::= \"a\" (\n")
add_test(NAME bench_smol_bench_bad_schema
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 1
                 -m "${bench_model}" --json-schema "${CMAKE_CURRENT_BINARY_DIR}/data/bad-schema.json")
add_test(NAME bench_smol_bench_bad_grammar
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 1
                 -m "${bench_model}" --grammar-file "${CMAKE_CURRENT_BINARY_DIR}/data/bad-grammar.gbnf")
add_test(NAME bench_smol_bench_missing_schema
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 1
                 -m "${bench_model}" --json-schema "${CMAKE_CURRENT_BINARY_DIR}/data/no-such-schema.json")
add_test(NAME bench_smol_bench_schema_and_grammar
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_exit_check}" $<TARGET_FILE:smol-bench> 2
                 -m "${bench_model}" --json-schema "${PROJECT_SOURCE_DIR}/bench/schemas/order.json"
                 --grammar-file "${PROJECT_SOURCE_DIR}/bench/schemas/list.gbnf")

# llama-batched-bench's parallel test: one row per B, in its table's shape.
add_test(NAME bench_smol_bench_parallel
         COMMAND $<TARGET_FILE:smol-bench> -m "${bench_model}" -npp 8 -ntg 4 -npl 1,3 -t 1)
set_tests_properties(bench_smol_bench_parallel PROPERTIES RUN_SERIAL TRUE
  PASS_REGULAR_EXPRESSION "\\|  *PP \\|  *TG \\|  *B \\|  *N_KV \\|.*\\|  *8 \\|  *4 \\|  *1 \\|  *12 \\|.*\\|  *8 \\|  *4 \\|  *3 \\|  *36 \\|")

# The model column names the file type as llama-bench does: general.file_type 25 in the
# IQ4_NL fixture (tests/make_model.cmake checks 30 on a synthetic IQ4_XS file).
add_test(NAME bench_names_iq4_nl_fixture
  COMMAND $<TARGET_FILE:smol-bench> -m "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.iq4_nl.gguf"
          -p 4 -n 0 -r 1)
set_tests_properties(bench_names_iq4_nl_fixture PROPERTIES
  RUN_SERIAL TRUE PASS_REGULAR_EXPRESSION "\\| smollm3 [0-9.]+[MK] IQ4_NL - 4\\.5 bpw \\|")

# --spec-type: the pass-cost rows and one row per task and way of decoding, the drafted
# replies' texts equal to the plain ones ("same text": yes); never the speeds.
set(smol_bench_spec_check [=[
import re, subprocess, sys
tool, model = sys.argv[1:3]
out = subprocess.run([tool, "-m", model, "-n", "8", "-r", "1", "-t", "1", "--spec-type",
                      "ngram-simple", "--spec-ngram-size-n", "2"],
                     capture_output=True, text=True, check=True).stdout
if "ngram-simple, draft-max 16, draft-min 0, ngram-size-n 2, 8 tokens" not in out:
    sys.exit("header missing:\n" + out)
if len(re.findall(r"^\| (1|2|4|8|16) tokens? \| tiles \(verification\) \|", out, re.M)) != 5:
    sys.exit("pass costs missing:\n" + out)
tasks = ["grounded: copy", "grounded: extract", "grounded: code",
         "open: story", "open: explain", "open: advice"]
for task in tasks:
    rows = re.findall(r"^\| %s \| (plain \(matvec\)|plain \(tiles\)|ngram-simple) \|(.*)$"
                      % re.escape(task), out, re.M)
    if [r[0] for r in rows] != ["plain (matvec)", "plain (tiles)", "ngram-simple"] \
            or not rows[2][1].rstrip().endswith("| yes |"):
        sys.exit("%s: rows %s\n%s" % (task, rows, out))
print("smol-bench --spec-type rows ok")
]=])
add_test(NAME bench_smol_bench_spec
         COMMAND ${Python3_EXECUTABLE} -c "${smol_bench_spec_check}" $<TARGET_FILE:smol-bench>
                 "${bench_model}")
set_tests_properties(bench_smol_bench_spec PROPERTIES RUN_SERIAL TRUE)
