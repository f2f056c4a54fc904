#!/bin/sh
# git-sync: mirror the committed history of agent $OXIOS_AGENT to the git
# remote $ARG_REMOTE (branch $ARG_BRANCH), one git commit per Oxios commit,
# through ox-commit and ox-state only. A run after the first reads the
# Oxios-Commit trailer of the remote branch's head and adds what came since.
set -eu
run=${OXIOS_RUN:?git-sync runs inside a run: ox-program run git-sync}
agent=$OXIOS_AGENT
remote=$ARG_REMOTE
branch=${ARG_BRANCH:-main}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The remote belongs to the operator, not to the run's user: git's
# upload-pack and receive-pack take safe.directory from a global config
# only, so the run has one of its own.
export GIT_CONFIG_GLOBAL="$tmp/gitconfig" GIT_CONFIG_NOSYSTEM=1
git config --global safe.directory '*'
git config --global user.name "$agent"
git config --global user.email "$agent@oxios.invalid"
g() { git "$@"; }
tree=$tmp/tree
g init -q "$tree"
cd "$tree"
g symbolic-ref HEAD "refs/heads/$branch"
last=""
if g fetch -q "$remote" "refs/heads/$branch" 2>"$tmp/fetch"; then
	g reset -q --hard FETCH_HEAD
	last=$(g log -1 --format='%(trailers:key=Oxios-Commit,valueonly)' | head -n 1)
	if [ -z "$last" ]; then
		echo "git-sync: $remote's $branch has no Oxios-Commit trailer at its head: not a mirror of git-sync, refusing to push over it" >&2
		exit 1
	fi
elif g ls-remote --exit-code "$remote" >/dev/null 2>&1; then
	: # a repository without the branch: a first sync
elif ! g ls-remote "$remote" >/dev/null 2>"$tmp/ls"; then
	echo "git-sync: cannot reach $remote: $(cat "$tmp/ls")" >&2
	exit 1
fi
# The agent's commits, oldest first.
ox-commit log -a "$agent" --json | jq -r '.commit' >"$tmp/newest"
sed '1!G;h;$!d' "$tmp/newest" >"$tmp/commits"
if [ -n "$last" ]; then
	if ! grep -qx "$last" "$tmp/commits"; then
		echo "git-sync: the remote's last mirrored commit $last is not in agent $agent's history" >&2
		exit 1
	fi
	sed "1,/^$last\$/d" "$tmp/commits" >"$tmp/todo"
else
	cp "$tmp/commits" "$tmp/todo"
fi
if [ ! -s "$tmp/todo" ]; then
	echo "git-sync: $remote ($branch) is up to date with agent $agent"
	exit 0
fi
only="agents/$agent/state/*"
# record COMMIT: commit the tree as the Oxios commit COMMIT.
record() {
	ox-commit show -a "$agent" "$1" --json >"$tmp/show"
	jq -r '.message' "$tmp/show" >"$tmp/msg"
	printf '\nOxios-Commit: %s\n' "$1" >>"$tmp/msg"
	when=$(jq -r '.time' "$tmp/show")
	g add -A
	GIT_AUTHOR_DATE=$when GIT_COMMITTER_DATE=$when g commit -q --allow-empty -F "$tmp/msg"
}
prev=$last
n=0
while IFS= read -r c; do
	if [ -z "$prev" ]; then
		# The first commit: the agent's state now, taken back to it.
		ox-state ls -a "$agent" --json | jq -r '.key' | while IFS= read -r k; do
			mkdir -p "$(dirname "agents/$agent/state/$k")"
			ox-state load -a "$agent" "$k" >"agents/$agent/state/$k"
		done
		ox-commit diff -p -a "$agent" "$c" >"$tmp/d"
		[ ! -s "$tmp/d" ] || g apply -R --include="$only" "$tmp/d"
	else
		ox-commit diff -p -a "$agent" "$prev" "$c" >"$tmp/d"
		[ ! -s "$tmp/d" ] || g apply --include="$only" "$tmp/d"
	fi
	record "$c"
	prev=$c
	n=$((n + 1))
done <"$tmp/todo"
case $remote in
/*)
	# A folder: the remote fetches from the tree, rather than the tree
	# pushing to it: a push moves objects out of a quarantine folder,
	# which the sandbox's Landlock refuses (EXDEV, a rename across
	# folders); a fetch keeps a pack where it writes it.
	git -C "$remote" -c fetch.unpackLimit=1 fetch -q --no-write-fetch-head "$tree" "HEAD:refs/heads/$branch"
	;;
*) g push -q "$remote" "HEAD:refs/heads/$branch" ;;
esac
ox-state save "git-sync/last" "$prev" >/dev/null
echo "git-sync: mirrored $n commits of agent $agent to $remote ($branch), up to $prev"
