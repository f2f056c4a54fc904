# fish completion for ox-events(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-events -f
complete -c ox-events -s a -l agent -x -a '(__ox_agent_names)' -d 'Only events of agent NAME'
complete -c ox-events -s t -l type -x -a 'state.changed memory.added memory.forgotten commit.created commit.tagged policy.denied run.started run.exited run.queued budget.exceeded schedule.fired agent.removed exec' -d 'Only events of kind T (a glob)'
complete -c ox-events -s F -l fleet -d 'The events of every node of the fleet'
complete -c ox-events -l since -x -d 'First replay the events of audit entries from SEQ on'
complete -c ox-events -s n -l count -x -d 'Exit after N events'
complete -c ox-events -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-events -l json -d 'Print JSON lines even on a terminal'
complete -c ox-events -s h -l help -d 'Show help'
complete -c ox-events -s v -l version -d 'Print the version'
