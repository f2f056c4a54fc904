#!/bin/sh
# code-review: a model reviews the changes of the git repository at the
# run's /work (ox-program run code-review --work DIR). The diff and the
# findings are saved as reviews/RUN.diff and reviews/RUN.md in the agent's
# state, and the findings sent to the inbox of $ARG_NOTIFY (default: the
# agent's own). Everything goes through ox-* commands, so the agent's
# policy decides and the audit log records each step.
set -eu
run=${OXIOS_RUN:?code-review runs inside a run: ox-program run code-review}
base=${ARG_BASE:-HEAD}
notify=${ARG_NOTIFY:-$OXIOS_AGENT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The folder belongs to the operator, not to the run's user.
export GIT_CONFIG_GLOBAL="$tmp/gitconfig"
git config --global safe.directory '*'
g() { git "$@"; }
if ! g rev-parse --git-dir >/dev/null 2>&1; then
	echo "code-review: $(pwd) is not a git repository: give the folder with --work DIR" >&2
	exit 2
fi
g diff "$base" -- >"$tmp/diff"
# New files too, as git would show them once added.
g ls-files --others --exclude-standard | while IFS= read -r f; do
	g diff --no-index -- /dev/null "$f" >>"$tmp/diff" || true
done
if [ ! -s "$tmp/diff" ]; then
	echo "code-review: no changes against $base"
	exit 0
fi
ox-state save "reviews/$run.diff" <"$tmp/diff" >/dev/null
# The model is asked in a run of its own (an LLM run of the same agent,
# under its budget), the diff as its input and SKILL.md as its system
# prompt.
system=$(sed '1,/^---$/{/^---$/!d;};1,/^---$/d' "$PROGRAM_DIR/SKILL.md")
ox-spawn -a "$OXIOS_AGENT" --no-memory --no-keep -s "$system" \
	"Review this change (git diff against $base). List your findings as your instructions say." \
	<"$tmp/diff" >"$tmp/run.jsonl" || {
	echo "code-review: the model's run failed:" >&2
	jq -r 'select(.type=="exit" or .type=="error") | .text' "$tmp/run.jsonl" >&2 || true
	exit 1
}
jq -rs '[.[] | select(.type=="message" and .role=="assistant" and (.text // "") != "") | .text] | last // empty' "$tmp/run.jsonl" >"$tmp/findings"
if [ ! -s "$tmp/findings" ]; then
	echo "code-review: the model gave no findings" >&2
	exit 1
fi
{
	echo "# Review of $(g rev-parse --short "$base" 2>/dev/null || echo "$base") and the work tree (run $run)"
	echo
	g apply --stat "$tmp/diff" | tail -n 1
	echo
	cat "$tmp/findings"
} >"$tmp/review.md"
ox-state save "reviews/$run.md" <"$tmp/review.md" >/dev/null
ox-msg send "$notify" "code-review $run: findings in reviews/$run.md of agent $OXIOS_AGENT" <"$tmp/review.md" >/dev/null
cat "$tmp/review.md"
