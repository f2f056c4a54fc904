#!/bin/sh
# ouroboros: interview -> seed -> execute -> evaluate -> evolve, through
# ox-* commands only. Run it with ox-program run ouroboros -a AGENT --work DIR
# "TASK" [check=CMD]: the model's steps are LLM runs of the agent (under its
# budget); each generation's change is made and checked in a run with --work
# DIR, a copy-on-write workspace of the folder, whose pending work is the
# candidate (ox-work apply RUN takes the one that passed); the seed is
# seeds/NAME.md (and .json) in the agent's state, committed at each
# generation, so ox-commit log -a AGENT seeds/ shows how it evolved.
set -u
run=${OXIOS_RUN:?ouroboros runs inside a run: ox-program run ouroboros}
agent=$OXIOS_AGENT
task=$*
if [ -z "$task" ]; then
	echo "ouroboros: give the task: ox-program run ouroboros -a $agent --work DIR \"TASK\"" >&2
	exit 2
fi
host=${PROGRAM_WORK:-}
if [ -z "$host" ]; then
	echo "ouroboros: give the project's folder with --work DIR" >&2
	exit 2
fi
name=${ARG_NAME:-$(printf '%s' "$task" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | cut -c1-40 | sed 's/^-*//; s/-*$//')}
[ -n "$name" ] || name=seed
generations=${ARG_GENERATIONS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
system=$(sed '1,/^---$/{/^---$/!d;};1,/^---$/d' "$PROGRAM_DIR/SKILL.md")
seed=seeds/$name
gen=0

say() { echo "ouroboros: $*"; }

# finish STATUS EXIT MESSAGE: record how the loop ended, commit, exit.
finish() {
	jq -n --arg s "$1" --arg m "$3" --argjson g "$gen" --arg r "$run" --arg p "${passed_run:-}" \
		'{type: "ouroboros", status: $s, generation: $g, run: $r, passed_run: $p, text: $m}' -c >"$tmp/status.json"
	ox-state save "$seed/status.json" <"$tmp/status.json" >/dev/null
	ox-commit -a "$agent" -q -m "ouroboros $name: $1 at generation $gen"
	say "$3"
	cat "$tmp/status.json"
	exit "$2"
}
trap 'finish stopped 130 "stopped by the operator at generation $gen; the spec is $seed.md"' INT TERM

# ask STEP TASK INPUT: the model's last answer, as one JSON object, into
# $tmp/answer; its run's records in $tmp/ask.jsonl. A refused run (the
# budget) or an answer that is not JSON ends the loop.
ask() {
	ox-spawn -a "$agent" --no-memory --no-keep -s "$system" "$2" <"$3" >"$tmp/ask.jsonl" 2>"$tmp/ask.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		if grep -q EDQUOT "$tmp/ask.err" "$tmp/ask.jsonl"; then
			finish budget 1 "the budget ended before the $1 step of generation $gen ($(grep -ho '[^"]*EDQUOT[^"]*' "$tmp/ask.err" "$tmp/ask.jsonl" | head -n 1)); the spec is $seed.md"
		fi
		finish failed 1 "the model's run for the $1 step failed (exit $rc): $(cat "$tmp/ask.err")"
	fi
	jq -rs '[.[] | select(.type=="message" and .role=="assistant" and (.text // "") != "") | .text] | last // ""' "$tmp/ask.jsonl" |
		sed '/^```/d' | tr '\n' ' ' | sed 's/^[^{]*//; s/[^}]*$//' >"$tmp/raw"
	if ! jq -c . "$tmp/raw" >"$tmp/answer" 2>/dev/null || [ ! -s "$tmp/answer" ]; then
		finish failed 1 "the model's answer to the $1 step is not a JSON object: $(head -c 300 "$tmp/raw")"
	fi
}

# The project as the model sees it: its files (git's, or all) and the
# small ones' content.
context() {
	{
		echo "The project's files (folder $host):"
		(git -c safe.directory='*' ls-files 2>/dev/null || find . -type f ! -path './.git/*') | head -200
		git -c safe.directory='*' ls-files 2>/dev/null | head -50 | while IFS= read -r f; do
			[ -f "$f" ] && [ "$(wc -c <"$f")" -lt 8192 ] && { echo; echo "--- $f"; cat "$f"; }
		done
	} >"$tmp/context"
}

# save_seed MESSAGE: seeds/NAME.json and .md from $tmp/seed.json, committed.
save_seed() {
	if [ -n "${ARG_CHECK:-}" ]; then
		jq --arg c "$ARG_CHECK" 'if (.checks | index($c)) then . else .checks = [$c] + .checks end' "$tmp/seed.json" >"$tmp/s" && mv "$tmp/s" "$tmp/seed.json"
	fi
	if ! jq -e '(.goal | type == "string") and (.checks | type == "array" and length > 0)' "$tmp/seed.json" >/dev/null; then
		finish failed 1 "the seed has no goal or no checks: $(cat "$tmp/seed.json")"
	fi
	jq --argjson g "$gen" --arg t "$task" '. + {generation: $g, task: $t}' "$tmp/seed.json" >"$tmp/s" && mv "$tmp/s" "$tmp/seed.json"
	jq -r '"# Seed: '"$name"' (generation \(.generation))\n\nTask: \(.task)\n\n## Goal\n\n\(.goal)\n\n## Constraints\n\n\((.constraints // []) | map("- " + .) | join("\n"))\n\n## Acceptance checks\n\n\(.checks | map("- `" + . + "`") | join("\n"))\n"' "$tmp/seed.json" >"$tmp/seed.md"
	if [ -n "${1:-}" ]; then
		printf '\n## Why this generation\n\n%s\n' "$1" >>"$tmp/seed.md"
	fi
	ox-state save "$seed.json" <"$tmp/seed.json" >/dev/null
	ox-state save "$seed.md" <"$tmp/seed.md" >/dev/null
	ox-commit -a "$agent" -q -m "ouroboros $name: seed generation $gen${1:+: $1}"
}

# A run's stdin is what ox-program run was given (a file of answers), or
# nothing. From a terminal (PROGRAM_TTY=1) it is what the operator types:
# kept as fd 4 for the interview, and nothing else reads it.
if [ "${PROGRAM_TTY:-}" = 1 ]; then
	exec 4<&0 0</dev/null
	: >"$tmp/stdin"
else
	cat >"$tmp/stdin"
fi
context
# Interview.
cat "$tmp/context" >"$tmp/in"
ask interview "Interview. The task: $task. Ask what you must know before writing its specification." "$tmp/in"
jq -r '.questions // [] | .[] | tostring | gsub("\n"; " ")' "$tmp/answer" >"$tmp/questions"
: >"$tmp/answers"
if [ -s "$tmp/questions" ]; then
	if [ "${PROGRAM_TTY:-}" = 1 ] && [ "${ARG_INTERVIEW:-yes}" = yes ]; then
		# Asked on the operator's terminal, one question at a time.
		n=$(wc -l <"$tmp/questions")
		say "the model asks $n question(s) before writing the spec of: $task. Answer each on one line (an empty line, or Ctrl-D: the model's assumption stands)"
		i=0
		while IFS= read -r q <&3; do
			i=$((i + 1))
			say "question $i/$n: $q"
			a=
			IFS= read -r a <&4 || a=
			[ -n "$a" ] && printf '%s -> %s\n' "$q" "$a" >>"$tmp/answers"
		done 3<"$tmp/questions"
		exec 4<&-
		say "answers from the terminal"
	elif [ -s "$tmp/stdin" ]; then
		# Answers given on stdin (ox-program run ... < ANSWERS), one a line.
		paste -d '\n' "$tmp/questions" "$tmp/stdin" | sed 'N;s/\n/ -> /' >"$tmp/answers"
		say "answers from stdin"
	elif [ "${ARG_INTERVIEW:-yes}" = yes ]; then
		{ echo "ouroboros $name (run $run) asks, before writing the spec of: $task"; nl -w1 -s'. ' "$tmp/questions"; echo "Answer with: ox-msg send $agent \"1. ... 2. ...\""; } >"$tmp/ask.txt"
		ox-msg send "$agent" "$(cat "$tmp/ask.txt")" >/dev/null
		# Our own message read, the next is the answer.
		ox-msg recv -a "$agent" >/dev/null
		say "questions sent to the inbox of $agent; waiting ${ARG_WAIT:-10m} for an answer (ox-msg send $agent \"...\")"
		ox-msg recv -a "$agent" --json -w "${ARG_WAIT:-10m}" |
			jq -r --arg me "$agent" 'select(.from != $me) | .text' >"$tmp/answers"
		[ -s "$tmp/answers" ] || say "no answer came: the model's assumptions stand"
	fi
fi
# Seed.
{ cat "$tmp/context"; echo; echo "Questions and answers:"; cat "$tmp/questions"; cat "$tmp/answers"; } >"$tmp/in"
ask seed "Seed. The task: $task. Write its specification.${ARG_CHECK:+ The operator's acceptance check: $ARG_CHECK}" "$tmp/in"
cp "$tmp/answer" "$tmp/seed.json"
gen=1
save_seed ""
say "seed $seed.md, generation 1"
while :; do
	# Execute: the model proposes the change for this generation's seed.
	{ echo "The specification:"; cat "$tmp/seed.json"; echo; cat "$tmp/context"; } >"$tmp/in"
	ask execute "Execute generation $gen of the specification: give the files." "$tmp/in"
	cp "$tmp/answer" "$tmp/change.json"
	# Evaluate: the change is made in a copy-on-write workspace of the
	# folder, and the checks run there; the run's output is the record.
	jq -c --slurpfile s "$tmp/seed.json" '{change: ., checks: $s[0].checks}' "$tmp/change.json" >"$tmp/job.json"
	ox-spawn -a "$agent" --work "$host" -- sh -c '
		set -u
		job=$(cat)
		printf "%s" "$job" | jq -r ".change.delete // [] | .[]" | while IFS= read -r f; do rm -rf -- "./$f"; done
		n=$(printf "%s" "$job" | jq ".change.files // [] | length")
		i=0
		while [ "$i" -lt "$n" ]; do
			p=$(printf "%s" "$job" | jq -r ".change.files[$i].path")
			case $p in /*|..|../*|*/../*|*/..) echo "refused path $p" >&2; exit 2 ;; esac
			mkdir -p "$(dirname "./$p")"
			printf "%s" "$job" | jq -j ".change.files[$i].content" >"./$p"
			i=$((i + 1))
		done
		printf "%s" "$job" | jq -r ".checks[]" | while IFS= read -r c; do
			out=$(sh -c "$c" 2>&1); st=$?
			jq -cn --arg c "$c" --argjson s "$st" --arg o "$(printf "%s" "$out" | tail -c 2000)" "{command: \$c, status: \$s, output: \$o}"
		done' <"$tmp/job.json" >"$tmp/eval.jsonl" 2>"$tmp/eval.err"
	erun=$(jq -r 'select(.type=="run") | .id' "$tmp/eval.jsonl" | head -n 1)
	if [ -z "$erun" ]; then
		grep -q EDQUOT "$tmp/eval.err" && finish budget 1 "the budget ended before generation $gen's evaluation; the spec is $seed.md"
		finish failed 1 "the evaluation run did not start: $(cat "$tmp/eval.err")"
	fi
	jq -c 'select(.type=="output" and .stream=="stdout") | .text | fromjson? // empty' "$tmp/eval.jsonl" >"$tmp/checks"
	jq -s --argjson g "$gen" --arg r "$erun" --slurpfile c "$tmp/change.json" \
		'{type: "evaluation", generation: $g, run: $r, passed: (length > 0 and all(.status == 0)), checks: ., note: ($c[0].note // "")}' \
		"$tmp/checks" >"$tmp/evaluation.json"
	ox-state save "$seed/evals/$gen.json" <"$tmp/evaluation.json" >/dev/null
	if jq -e .passed "$tmp/evaluation.json" >/dev/null; then
		passed_run=$erun
		finish passed 0 "generation $gen passed its checks; its change is run $erun's pending work: ox-work diff $erun, ox-work apply $erun"
	fi
	say "generation $gen failed: $(jq -r '[.checks[] | select(.status != 0) | .command] | join(", ")' "$tmp/evaluation.json")"
	if [ "$gen" -ge "$generations" ]; then
		finish exhausted 1 "$generations generations and the checks still fail; the spec is $seed.md"
	fi
	# Evolve: the spec revised from the evaluation.
	{ echo "The specification:"; cat "$tmp/seed.json"; echo; echo "The evaluation of generation $gen:"; cat "$tmp/evaluation.json"; } >"$tmp/in"
	ask evolve "Evolve the specification from the evaluation of generation $gen." "$tmp/in"
	cp "$tmp/answer" "$tmp/seed.json"
	why="generation $gen failed $(jq -r '[.checks[] | select(.status != 0) | .command] | join(", ")' "$tmp/evaluation.json")"
	gen=$((gen + 1))
	save_seed "$why"
	say "seed $seed.md, generation $gen"
done
