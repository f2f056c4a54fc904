# fish completion for ox-top(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-top -f
complete -c ox-top -s n -l count -x -d 'stop after COUNT samples'
complete -c ox-top -s d -l interval -x -d 'the time between samples'
complete -c ox-top -s F -l fleet -d 'sample every node of the fleet'
complete -c ox-top -s a -l agent -x -a '(__ox_agent_names)' -d 'only the runs of agent NAME'
complete -c ox-top -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-top -l json -d 'print JSON lines even on a terminal'
complete -c ox-top -s h -l help -d 'show help'
complete -c ox-top -s v -l version -d 'print the version'
