# fish completion for ox-wait(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

# __ox_wait_runs prints the ids of the runs that ox-ps --all lists, with
# what they run; nothing when the daemon is not running.
function __ox_wait_runs
    timeout 2 ox-ps --all --json 2>/dev/null | string replace -rf '^\{"type":"run","id":"([a-z0-9]+)".*"text":"((?:[^"\\\\]|\\\\.)*)"\}$' '$1\t$2'
end

complete -c ox-wait -f
complete -c ox-wait -s a -l agent -x -a '(__ox_agent_names)' -d 'not needed: a run id names its agent'
complete -c ox-wait -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-wait -l json -d 'print JSON lines even on a terminal'
complete -c ox-wait -s h -l help -d 'show help'
complete -c ox-wait -s v -l version -d 'print the version'
complete -c ox-wait -a '(__ox_wait_runs)'
