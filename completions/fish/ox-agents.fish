# fish completion for ox-agents(1)

set -l __ox_agents_cmds ls show rm

function __ox_agents_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-agents -f
complete -c ox-agents -n "not __fish_seen_subcommand_from $__ox_agents_cmds" -s h -l help -d 'Show help'
complete -c ox-agents -n "not __fish_seen_subcommand_from $__ox_agents_cmds" -s v -l version -d 'Print the version'
complete -c ox-agents -n "not __fish_seen_subcommand_from $__ox_agents_cmds" -a ls -d 'List the agents you may act on'
complete -c ox-agents -n "not __fish_seen_subcommand_from $__ox_agents_cmds" -a show -d 'Describe agent NAME'
complete -c ox-agents -n "not __fish_seen_subcommand_from $__ox_agents_cmds" -a rm -d 'Remove agents (admin)'

complete -c ox-agents -n "__fish_seen_subcommand_from $__ox_agents_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-agents -n "__fish_seen_subcommand_from $__ox_agents_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-agents -n "__fish_seen_subcommand_from $__ox_agents_cmds" -s h -l help -d 'Show help'
complete -c ox-agents -n "__fish_seen_subcommand_from show rm" -a '(__ox_agents_names)' -d 'Agent'
