# fish completion for ox-attach(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

# __ox_attach_runs prints the ids of the runs that ox-ps --all lists, with
# what they run; nothing when the daemon is not running.
function __ox_attach_runs
    timeout 2 ox-ps --all --json 2>/dev/null | string replace -rf '^\{"type":"run","id":"([a-z0-9]+)".*"text":"((?:[^"\\\\]|\\\\.)*)"\}$' '$1\t$2'
end

complete -c ox-attach -f
complete -c ox-attach -s a -l agent -x -a '(__ox_agent_names)' -d 'not needed: a run id names its agent'
complete -c ox-attach -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-attach -l json -d 'print JSON lines even on a terminal'
complete -c ox-attach -s h -l help -d 'show help'
complete -c ox-attach -s v -l version -d 'print the version'
complete -c ox-attach -a '(__ox_attach_runs)'
