# fish completion for ox-approve(1)

set -l __ox_approve_cmds ls yes no

complete -c ox-approve -f
complete -c ox-approve -n "not __fish_seen_subcommand_from $__ox_approve_cmds" -a ls -d 'List the pending requests'
complete -c ox-approve -n "not __fish_seen_subcommand_from $__ox_approve_cmds" -a yes -d 'Approve requests'
complete -c ox-approve -n "not __fish_seen_subcommand_from $__ox_approve_cmds" -a no -d 'Deny requests'
complete -c ox-approve -n "not __fish_seen_subcommand_from $__ox_approve_cmds" -s v -l version -d 'Print the version'
complete -c ox-approve -n "not __fish_seen_subcommand_from yes no" -s a -l agent -x -d 'Only requests of agent NAME'
complete -c ox-approve -n "not __fish_seen_subcommand_from yes no" -l all -d 'Decided requests too'
complete -c ox-approve -n "not __fish_seen_subcommand_from yes no" -s f -l follow -d 'Then print each new request and decision'
complete -c ox-approve -n "__fish_seen_subcommand_from yes no" -s m -l reason -x -d 'Why (kept in the audit log)'
complete -c ox-approve -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-approve -l json -d 'Print JSON lines even on a terminal'
complete -c ox-approve -s h -l help -d 'Show help'
