# fish completion for ox-kill(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

# __ox_kill_runs prints the ids of the runs that ox-ps lists, with
# what they run; nothing when the daemon is not running.
function __ox_kill_runs
    timeout 2 ox-ps --json 2>/dev/null | string replace -rf '^\{"type":"run","id":"([a-z0-9]+)".*"text":"((?:[^"\\\\]|\\\\.)*)"\}$' '$1\t$2'
end

complete -c ox-kill -f
complete -c ox-kill -s s -l signal -x -a 'STOP CONT INT TERM KILL HUP USR1 USR2 QUIT' -d 'the SIGNAL to send (default TERM)'
complete -c ox-kill -s a -l agent -x -a '(__ox_agent_names)' -d 'not needed: a run id names its agent'
complete -c ox-kill -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-kill -l json -d 'print JSON lines even on a terminal'
complete -c ox-kill -s h -l help -d 'show help'
complete -c ox-kill -s v -l version -d 'print the version'
complete -c ox-kill -a '(__ox_kill_runs)'
