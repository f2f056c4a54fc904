#!/usr/bin/env bash
# demo.sh: a scripted tour of Oxios. It starts a private oxiosd on a fresh
# temporary directory, runs every command there is, stops the daemon and
# cleans up. It needs no terminal and nothing but the binaries; jq and
# script(1) make the output nicer when present.
#
# usage: contrib/demo.sh [BINDIR]     (make demo runs it on bin/)
set -euo pipefail

bindir=$(cd "${1:-bin}" && pwd)
for b in oxiosd ox ox-agents ox-state ox-audit ox-commit ox-events ox-remember ox-recall ox-forget ox-spawn ox-ps ox-wait ox-kill ox-attach ox-exec ox-budget ox-agent ox-policy ox-top ox-status ox-schedule ox-fork ox-msg ox-approve ox-work ox-receipt oxios-sandbox-init fakellm; do
	[[ -x $bindir/$b ]] || { echo "demo: no $bindir/$b; run make build first" >&2; exit 2; }
done
export PATH=$bindir:$PATH

dir=$(mktemp -d "${TMPDIR:-/tmp}/oxios-demo.XXXXXX")
export OXIOS_SOCKET=$dir/oxiosd.sock
unset OXIOS_AGENT OXIOS_CONFIG
daemon=
llm=

cleanup() {
	[[ -n $llm ]] && kill -TERM "$llm" 2>/dev/null || true
	if [[ -n $daemon ]] && kill -0 "$daemon" 2>/dev/null; then
		kill -TERM "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[[ -t 1 ]] || bold='' dim='' off=''

say() { printf '\n%s# %s%s\n' "$bold" "$*" "$off"; }

# run prints a shell command line, then runs it.
run() {
	printf '%s+ %s%s\n' "$dim" "$1" "$off"
	eval "$1"
}

# fails runs a command that must fail with exit status $1.
fails() {
	local want=$1 got=0
	printf '%s+ %s%s\n' "$dim" "$2" "$off"
	eval "$2" || got=$?
	if [[ $got != "$want" ]]; then
		echo "demo: exit status $got, want $want" >&2
		exit 1
	fi
	printf '%s(exit status %s, as expected)%s\n' "$dim" "$got" "$off"
}

if command -v jq >/dev/null; then jq='jq -c .'; else jq=cat; fi

# start runs oxiosd in the background and waits until it answers: an
# ox-state that does not exit 69 (unreachable) reached it.
start() {
	run "oxiosd --config \$dir/oxios.toml --data \$dir/data --socket \$OXIOS_SOCKET --no-mount 2>>\$dir/oxiosd.log &"
	daemon=$!
	local i
	for ((i = 0; i < 100; i++)); do
		if ! kill -0 "$daemon" 2>/dev/null; then
			echo "demo: oxiosd exited; its log:" >&2
			cat "$dir/oxiosd.log" >&2
			exit 1
		fi
		local rc=0
		ox-state ls -a x >/dev/null 2>&1 || rc=$?
		[[ $rc != 69 ]] && return
		sleep 0.1
	done
	echo "demo: oxiosd did not answer on $OXIOS_SOCKET within 10 s; its log:" >&2
	cat "$dir/oxiosd.log" >&2
	exit 1
}

# stop sends SIGTERM and checks that the daemon exits 0.
stop() {
	local rc=0
	printf '%s+ %s%s\n' "$dim" 'kill -TERM $daemon; wait $daemon' "$off"
	kill -TERM "$daemon"
	wait "$daemon" || rc=$?
	daemon=
	if [[ $rc != 0 ]]; then
		echo "demo: oxiosd exited with status $rc after SIGTERM, want 0; its log:" >&2
		cat "$dir/oxiosd.log" >&2
		exit 1
	fi
	printf '%s(exit status 0)%s\n' "$dim" "$off"
}

say "LLM runs need an OpenAI-compatible endpoint: here a scripted stand-in for one (fakellm), named in the config."
run "fakellm -script $(dirname "$0")/demo-llm.json > \$dir/llm.url 2>>\$dir/fakellm.log &"
llm=$!
for ((i = 0; i < 100; i++)); do [[ -s $dir/llm.url ]] && break; sleep 0.05; done
url=$(head -1 "$dir/llm.url")
[[ -n $url ]] || { echo "demo: fakellm did not start" >&2; exit 1; }
printf '[llm]\nbase_url = "%s"\nmodel = "demo-model"\nprompt_price = 0.15\ncompletion_price = 0.6\n' "$url" > "$dir/oxios.toml"
run 'cat $dir/oxios.toml'

say "Start a private daemon on a temporary directory ($dir)."
start

say "Save from an argument, and from a pipe. Saving creates the agent 'demo'."
run 'ox-state save -a demo greeting "hello, world"'
run 'printf "deploy at 10\ncheck the disks\n" | ox-state save -a demo notes/today.md'
run 'uname -a | ox-state save -a demo notes/host'
run 'head -c 48 /dev/urandom | ox-state save -a demo blob.bin'

say "ox is the front door: ox NAME runs ox-NAME (flags anywhere), ox help lists the commands."
run 'ox state -a demo load greeting; echo'
run 'ox help | sed -n 1,8p'

say "Load writes the raw value, so load is the inverse of save."
run 'ox-state load -a demo notes/today.md'
run 'ox-state load -a demo greeting; echo'
run 'ox-state load -a demo blob.bin | wc -c'
run "ox-state load --json -a demo greeting | $jq"
run "ox-state load --json -a demo blob.bin | $jq"

say "ls prints one JSON record per line off a terminal: input for jq or the next command."
run "ox-state ls -a demo | $jq"
run "ox-state ls -a demo notes/ | $jq"
if command -v jq >/dev/null; then
	run "ox-state ls -a demo | jq -s 'map(.size) | add'"
fi

say "On a terminal the same records are a table."
if command -v script >/dev/null; then
	run "script -qec 'ox-state ls -a demo' /dev/null </dev/null | tr -d '\r'"
else
	run 'ox-state ls -a demo --json'
fi

say "rm deletes keys and prints what it deleted."
run "ox-state rm -a demo notes/host blob.bin | $jq"

say "Errors go to stderr, with an exit status a script can test."
fails 1 'ox-state load -a demo notes/host'
fails 2 'ox-state save -a demo ../escape oops'
fails 2 'ox-state ls -a Not-An-Agent'
say "Flags may come after the arguments; -- ends them."
run "ox-state save notes/flags 'flags last' -a demo | $jq"
run "ox-state save -a demo -- -odd-key value | $jq"
run "ox-state rm -a demo -- -odd-key | $jq"
say "An agent that does not exist is ENOENT for every command that reads one."
fails 1 'ox-recall -a nosuch anything'

say "Version the state in git: a commit prints the paths it changed and the audit head it was made at."
run "ox-commit -a demo -m 'first notes' --tag v1 | $jq"
run 'ox-state save -a demo greeting "hello again"'
run 'ox-state save -a demo notes/tomorrow.md "rotate the logs"'
run "ox-commit diff -a demo v1 | $jq"
run 'ox-commit diff -a demo -p v1'
run "ox-commit -a demo -m 'second notes' | $jq"
run "ox-commit log -a demo | $jq"

say "Restore is a new change and a new commit: history is never rewritten."
run "ox-commit restore -a demo v1 | $jq"
run 'ox-state load -a demo greeting; echo'
if command -v git >/dev/null; then
	say "The repository is a normal git repository: git log and git fsck work on it."
	run 'git -C $dir/data/repo log --format="%h %s%n  %(trailers:key=Oxios-Audit-Seq,separator=%x20)"'
	run 'git -C $dir/data/repo fsck --strict --no-dangling && echo "git fsck: clean"'
fi

say "Memory: remember facts and log lines (one memory per line), recall them best first."
run "ox-remember -a demo --kind semantic 'backups run nightly at 02:00 and take an hour' | $jq"
run "printf '%s\\n' 'disk full on /var, nginx stopped writing logs' 'deploy of web 1.4 failed: migration timeout' 'cleared /var/log/old, disk at 60%' | ox-remember -a demo --tag ops | $jq"
run "ox-recall -a demo disk space | $jq"
say "Records are the next command's input: recall one agent's memories into another's."
run "ox-recall -a demo -k 2 'disk full' | ox-remember -a reviewer --tag from-demo | $jq"
run "ox-recall -a reviewer disk | jq -r .text"
run "ox-recall -a demo deploy | ox-forget -a demo | $jq"

say "Runs: any command becomes a supervised process of an agent. ox-spawn attaches, streams its records and exits with its status."
run "ox-spawn -a ops -- /bin/sh -c 'echo checking disks; df -h / | tail -1; echo done >&2' | $jq"
fails 3 "ox-spawn -a ops -- /bin/sh -c 'echo giving up; exit 3' >/dev/null"
say "A run inherits its agent's identity: from inside it, ox-* commands act as that agent and no other."
run "ox-spawn -a ops -- /bin/sh -c 'ox-state save notes/seen \"by \$OXIOS_RUN\" && ox-state load notes/seen; echo; ox-state load -a demo greeting; echo \"other agent: exit \$?\"' | jq -r 'select(.type==\"output\") | .text'"
say "Detached runs belong to oxiosd: list them, pause and resume them, end them."
run 'run=$(ox-spawn -a ops -d -- sleep 300 | jq -r .id); echo $run'
run "ox-ps -a ops | $jq"
run "ox-top -a ops -n 2 -d 300ms | tail -1 | jq -c '{admission, runs: [.runs[] | {id, cpu, rss, fds, cpu_percent}]}'"
run "ox-kill -s STOP \$run | jq -c '{id,state}'"
run "ox-ps -a ops | jq -c '{id,state}'"
run "ox-kill -s CONT \$run | jq -c '{id,state}'"
run "ox-kill \$run >/dev/null"
fails 143 "ox-wait \$run | $jq"
run "ox-ps -a ops --all | jq -c '{id,state,status,signal,text}'"
say "Agents: list them, show one, remove one (refused while it runs; audited; its history stays, so it can be restored)."
run "ox-agents ls | jq -c '{agent,keys,memories,jobs,policy,runs}'"
run "ox-state save -a scratch notes/draft 'a draft' | $jq"
run "ox-agents rm scratch > \$dir/removed.json; jq -c '{agent,removed,keys,restore}' \$dir/removed.json"
fails 1 'ox-agents show scratch'
run "ox-commit restore \$(jq -r .restore \$dir/removed.json) -a scratch | jq -c '{message,changed}'"
run "ox-state load -a scratch notes/draft; echo"

say "ox-status checks the daemon, its data dir, the config and the endpoint, and says what to fix."
run "ox-status --config \$dir/oxios.toml | jq -c '{check, ok, text}'"
say "LLM runs: ox-spawn with a task runs ox-agent, which thinks through the endpoint and acts only through syscalls; tool errors go back to the model."
run "ox-spawn -a ops 'check the disk and take notes' | jq -r 'select(.role != \"system\" and .type != \"output\") | .type + \": \" + .text'"
run 'ox-state load -a ops notes/disk; echo'
run "ox-recall -a ops --kind episodic disk | jq -r .text"
run "ox-budget show -a ops | jq -c '{used,run_limit}'"
say "A pipeline: the memories ox-recall prints become the context of an LLM run."
run "ox-recall -a demo -k 2 disk | ox-spawn -a ops 'what failed?' | jq -r 'select(.type == \"message\" and .role != \"system\") | .role + \": \" + .text'"
say "LLM runs are processes like any other: listed, signalled, waited for."
run 'run=$(ox-spawn -a ops -d "think for a minute" | jq -r .id); echo $run'
run "sleep 0.5; ox-ps -a ops | jq -c '{id,state,task,pid}'"
run "ox-kill \$run >/dev/null"
fails 143 "ox-wait \$run | jq -c '{run,status,signal}'"
fails 143 "ox-attach \$run | jq -c 'select(.type == \"error\" or .type == \"exit\") | {type,code,text}'"

say "exec runs a command for an agent under its policy: allowed programs only, no shell unless granted."
run 'echo one two three | ox-exec -a ops -- wc -w'
fails 77 "ox-exec -a ops -c 'cat /etc/passwd; rm -rf /'"
fails 77 'ox-exec -a ops -- rm -rf /tmp/x'
run "ox-budget show -a ops | $jq"
run "ox-audit log --op 'exec' | jq -c '{seq,op,target,result}'"

say "WASM tools run in a sandbox: the workspace at /work, nothing else of the host, no network, capped memory and time."
run "echo '{\"disks\":[{\"name\":\"sda\",\"free\":\"12G\"}]}' | ox-exec -a ops --wasm jsonq -- -r .disks[0].free"
run "printf 'the disk is full\nthe backup is not\n' | ox-exec -a ops --wasm textstat -- -top 2 | jq -c '{lines,words,top_words}'"
run "ox-audit log --op 'tool.run' | jq -c '{seq,op,target,result}'"

say "Each agent has a policy the kernel enforces on every syscall, socket and mount alike; only the admin changes it."
run "ox-policy show -a ops | grep -A3 '^\\[state\\]'"
run "ox-policy check -a ops state.save notes/seen | $jq"
say "A stricter policy: ops may write notes/disk only, and exec no wc. Which past actions would it have refused?"
run "ox-policy show -a ops | sed -e 's|^write = .*|write = [\"notes/disk\"]|' -e 's|, \"wc\"||' > \$dir/stricter.toml"
fails 1 "ox-audit export | ox-policy test -a ops \$dir/stricter.toml | jq -c '{seq,op,target,change,rule}'"
run "ox-policy set -a ops \$dir/stricter.toml | jq -c '{type,agent,digest}'"
fails 77 "ox-spawn -a ops -- /bin/sh -c 'ox-state save notes/seen again' >/dev/null"
say "The refusal is on the audit log, with the rule that refused it."
run "ox-audit log -a ops --json | jq -c 'select(.result == \"EPERM\") | {seq,op,target,result}' | tail -2"

say "Every change and refusal is an entry of a hash-chained audit log."
run "ox-audit log -n 4 | $jq"
run "ox-audit log --op 'version.*' | $jq"
run "ox-audit verify | $jq"
run 'ox-audit export > $dir/audit-export.jsonl; tail -1 $dir/audit-export.jsonl'
run "ox-audit verify --file \$dir/audit-export.jsonl | $jq"

say "ox-events streams what happens; --since replays from the audit log first, so a reader never misses an event."
run "ox-events --since 1 -n 3 | $jq"
run 'next=$(( $(ox-audit head --json | sed "s/.*\"seq\":\([0-9]*\).*/\1/") + 1 ))'
run "ox-events -a demo --type 'state.*' --since \$next -n 1 & ox-state save -a demo notes/live 'seen live' >/dev/null; wait \$!"

say "Schedules: oxiosd starts runs of an agent on a cron schedule, kept in the agent's versioned tree."
run "ox-schedule add -a ops --name nightly --cron '30 2 * * *' --tz Europe/Paris --catch-up -- /bin/sh -c 'echo nightly check' | jq -c '{name,schedule,tz,next}'"
say "ox-schedule run fires a job now, once: a run like any other, audited as schedule.fire and published as schedule.fired with its run."
run 'next=$(( $(ox-audit head --json | sed "s/.*\"seq\":\([0-9]*\).*/\1/") + 1 ))'
run 'run=$(ox-schedule run nightly | jq -r .id); echo $run'
run "ox-wait \$run | jq -c '{run,status}'"
run "ox-events --type schedule.fired --since \$next -n 1 | jq -c '{event,key,op,result}'"
say "A job that fires on its own every second; ox-events catches its next firing live."
run "ox-schedule add -a ops --name tick --cron '@every 1s' -- true | jq -c '{name,schedule,next}'"
run "ox-events --type schedule.fired -n 1 | jq -c '{event,key,run: .data.run,fired: .data.fired}'"
run "ox-schedule rm tick | jq -c '{name,deleted}'"
run "ox-schedule ls | jq -c '{name,agent,next,last_run,last_status}'"

say "Fork: a copy of an agent at its state now, sharing its history; in git it is one tree entry, whatever the agent holds."
run "ox-fork demo demo-try | jq -c '{agent,from,point,files}'"
run "ox-state save -a demo-try greeting 'hello from the fork' >/dev/null"
run "ox-fork diff demo-try | $jq"
run "ox-fork diff -p demo-try | jq -r .patch"
run "ox-fork rm demo-try | jq -c '{agent,removed,files}'"

say "Messages: a run of ops waits for work; demo sends it, with a memory attached (records on stdin pass through); ops answers, and demo receives the answer."
run 'rid=$(ox-spawn -d -a ops -- /bin/sh -c '"'"'m=$(ox-msg recv -f -n 1 --json); echo "$m"; ox-msg send -r "$(echo "$m" | jq -r .id)" demo "on it: the disk is checked" >/dev/null'"'"' | jq -r .id); echo $rid'
run "ox-recall -a demo disk -k 1 | ox-msg send -a demo ops 'please look at this' | jq -c '{id,from,agent,text}'"
run "ox-attach \$rid | jq -r 'select(.type==\"output\") | .text' | jq -c '{id,from,text,records: [.records[].text]}'"
run "ox-msg recv -a demo | jq -c '{id,from,agent,reply_to,text}'"
run "ox-msg ls -a ops | jq -c '{id,from,read}'"

say "Approvals: an ask rule holds ops' exec of wc until an operator decides; the run shows that it waits."
run "sed 's|^exec = \\[\\]|exec = [\"wc\"]|' \$dir/stricter.toml > \$dir/ask.toml && ox-policy set -a ops \$dir/ask.toml >/dev/null"
fails 77 "ox-policy check -a ops exec wc | jq -c '{op,args,ask,rule}'"
run 'rid=$(ox-spawn -d -a ops -- /bin/sh -c "ox-exec -- wc -c /etc/hostname" | jq -r .id); echo $rid'
run 'for i in $(seq 100); do id=$(ox-approve ls --json | jq -r .id | head -1); [[ -n $id ]] && break; sleep 0.1; done; echo $id'
run "ox-approve ls | jq -c '{id,agent,op,what,rule,state}'"
run "ox-approve yes -m 'read-only, fine' \$id | jq -c '{id,state,decided_by,reason}'"
run "ox-attach \$rid | jq -c 'select(.type==\"approval\" or .type==\"exit\") | {type,state,status}'"
run "ox-audit log --op 'approve.*' | jq -c '{seq,op,target}'"

say "Work on a real folder: the run sees it at /work through an overlay, the folder does not change until its patch is applied."
run 'mkdir -p $dir/src/calc && printf "answer=41\n" > $dir/src/calc/calc.txt && git -C $dir/src/calc init -q && git -C $dir/src/calc add -A && git -C $dir/src/calc -c user.name=demo -c user.email=demo@example.org commit -qm start'
run "printf '[work]\\nallow = [\"%s/src/**\"]\\n' \$dir > \$dir/coder.toml && ox-policy set -a coder \$dir/coder.toml >/dev/null"
run 'wid=$(ox-spawn -d -n -a coder --work $dir/src/calc -- sed -i s/41/42/ calc.txt | jq -r .id); ox-wait $wid; echo $wid'
run 'git -C $dir/src/calc status --porcelain; ox-work ls | jq -c "{run,state,changes,dir}"'
run 'ox-work diff $wid'
run "ox-work apply \$wid | jq -c '{run,state,digest}' && cat \$dir/src/calc/calc.txt"
say "A receipt of the run, checked offline against a head kept since; a forged one names what does not match."
run 'ox-audit head > $dir/head.json && ox-receipt $wid > $dir/run.receipt && ox-receipt verify --head $dir/head.json $dir/run.receipt | jq -c "{ok,run,entries}"'
fails 1 "sed 's/answer=42/answer=43/' \$dir/run.receipt > \$dir/forged.receipt && ox-receipt verify --head \$dir/head.json \$dir/forged.receipt"

say "Tamper with a copy of the log: change one byte of entry 3. verify names the entry and exits 1."
run 'cp -a $dir/data $dir/tampered && chmod u+w $dir/tampered/audit/seg-*'
run "sed -i '3s/\"result\":\"ok\"/\"result\":\"EPERM\"/' \$dir/tampered/audit/seg-*"
fails 1 'ox-audit verify --data $dir/tampered'
say "The untouched log, checked offline the same way, passes."
run "ox-audit verify --data \$dir/data | $jq"

say "Stop the daemon with SIGTERM: it finishes, flushes and exits 0."
stop

say "State is files. Start the daemon again: everything acknowledged is still there."
run 'find $dir/data/repo -path "*/state/*" -type f | sed "s|^$dir/||" | sort'
start
run "ox-state ls -a demo | $jq"
stop

say "Without a daemon, clients exit 69 and say how to start one."
fails 69 'ox-state ls -a demo'

say "oxiosd's log (stderr):"
sed 's/^/  /' "$dir/oxiosd.log"

say "Done. Try it yourself: make run"
