# fish completion for ox-fork(1)

set -l __ox_fork_cmds diff rm

complete -c ox-fork -f
complete -c ox-fork -n "not __fish_seen_subcommand_from $__ox_fork_cmds" -a diff -d 'List the files that differ from OTHER (or the fork point) to AGENT'
complete -c ox-fork -n "not __fish_seen_subcommand_from $__ox_fork_cmds" -a rm -d 'Remove an agent'
complete -c ox-fork -n "not __fish_seen_subcommand_from $__ox_fork_cmds" -s r -l rev -x -d 'Fork at commit REV'
complete -c ox-fork -n "not __fish_seen_subcommand_from $__ox_fork_cmds" -s v -l version -d 'Print the version'
complete -c ox-fork -n "__fish_seen_subcommand_from diff" -s p -l patch -d 'Print a unified diff'
complete -c ox-fork -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-fork -l json -d 'Print JSON lines even on a terminal'
complete -c ox-fork -s h -l help -d 'Show help'
