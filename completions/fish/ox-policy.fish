# fish completion for ox-policy(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_policy_cmds show set check test
set -l __ox_policy_ops state.load state.list state.save state.delete mem.remember exec tool.run net.fetch

complete -c ox-policy -f
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -s h -l help -d 'Show help'
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -s v -l version -d 'Print the version'
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -a show -d 'Print the policy of an agent'
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -a set -d 'Replace the policy of an agent with FILE (admin)'
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -a check -d 'Would OP ARGS be allowed for a run of the agent'
complete -c ox-policy -n "not __fish_seen_subcommand_from $__ox_policy_cmds" -a test -d 'Replay audit entries on stdin against the policy in FILE'

complete -c ox-policy -n "__fish_seen_subcommand_from $__ox_policy_cmds" -s a -l agent -x -a '(__ox_agent_names)' -d 'Act on agent NAME'
complete -c ox-policy -n "__fish_seen_subcommand_from $__ox_policy_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-policy -n "__fish_seen_subcommand_from $__ox_policy_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-policy -n "__fish_seen_subcommand_from $__ox_policy_cmds" -s h -l help -d 'Show help'

complete -c ox-policy -n "__fish_seen_subcommand_from set test" -F -d 'Policy file'
complete -c ox-policy -n "__fish_seen_subcommand_from check" -l policy -r -F -d 'Judge with the policy in FILE instead of the agent\'s'
complete -c ox-policy -n "__fish_seen_subcommand_from check; and not __fish_seen_subcommand_from $__ox_policy_ops" -a "$__ox_policy_ops" -d 'Op to judge'
