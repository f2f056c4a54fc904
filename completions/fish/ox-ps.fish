# fish completion for ox-ps(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-ps -f
complete -c ox-ps -l all -d 'include the ended runs'
complete -c ox-ps -s F -l fleet -d 'the runs of every node of the fleet'
complete -c ox-ps -s a -l agent -x -a '(__ox_agent_names)' -d 'only the runs of agent NAME'
complete -c ox-ps -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-ps -l json -d 'print JSON lines even on a terminal'
complete -c ox-ps -s h -l help -d 'show help'
complete -c ox-ps -s v -l version -d 'print the version'
