# fish completion for ox-budget(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_budget_cmds show set reset

complete -c ox-budget -f
complete -c ox-budget -n "not __fish_seen_subcommand_from $__ox_budget_cmds" -s h -l help -d 'Show help'
complete -c ox-budget -n "not __fish_seen_subcommand_from $__ox_budget_cmds" -s v -l version -d 'Print the version'
complete -c ox-budget -n "not __fish_seen_subcommand_from $__ox_budget_cmds" -a show -d 'Show the limits of an agent and what it has used'
complete -c ox-budget -n "not __fish_seen_subcommand_from $__ox_budget_cmds" -a set -d 'Set the limits of an agent (admin)'
complete -c ox-budget -n "not __fish_seen_subcommand_from $__ox_budget_cmds" -a reset -d 'Zero what an agent has used (admin)'

complete -c ox-budget -n "__fish_seen_subcommand_from $__ox_budget_cmds" -s a -l agent -x -a '(__ox_agent_names)' -d 'Act on agent NAME'
complete -c ox-budget -n "__fish_seen_subcommand_from $__ox_budget_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-budget -n "__fish_seen_subcommand_from $__ox_budget_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-budget -n "__fish_seen_subcommand_from $__ox_budget_cmds" -s h -l help -d 'Show help'

complete -c ox-budget -n "__fish_seen_subcommand_from set" -l tokens -x -d 'Tokens the agent may use in all'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l cost -x -d 'Cost the agent may incur in all'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l wall -x -d 'Wall time the agent runs may take in all'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l execs -x -d 'Execs the agent may make in all'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l run-tokens -x -d 'Tokens one run may use'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l run-cost -x -d 'Cost one run may incur'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l run-wall -x -d 'Wall time one run may take'
complete -c ox-budget -n "__fish_seen_subcommand_from set" -l run-execs -x -d 'Execs one run may make'
