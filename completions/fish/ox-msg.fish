# fish completion for ox-msg(1)

set -l __ox_msg_cmds send ls recv

complete -c ox-msg -f
complete -c ox-msg -n "not __fish_seen_subcommand_from $__ox_msg_cmds" -s h -l help -d 'Show help'
complete -c ox-msg -n "not __fish_seen_subcommand_from $__ox_msg_cmds" -s v -l version -d 'Print the version'
complete -c ox-msg -n "not __fish_seen_subcommand_from $__ox_msg_cmds" -a send -d 'Send TEXT (and records on stdin) to agent TO'
complete -c ox-msg -n "not __fish_seen_subcommand_from $__ox_msg_cmds" -a ls -d 'List an agent\'s inbox'
complete -c ox-msg -n "not __fish_seen_subcommand_from $__ox_msg_cmds" -a recv -d 'Print the unread messages and mark them read'

complete -c ox-msg -n "__fish_seen_subcommand_from $__ox_msg_cmds" -s a -l agent -x -d 'The agent (sender for send, inbox for ls and recv)'
complete -c ox-msg -n "__fish_seen_subcommand_from $__ox_msg_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-msg -n "__fish_seen_subcommand_from $__ox_msg_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-msg -n "__fish_seen_subcommand_from $__ox_msg_cmds" -s h -l help -d 'Show help'
complete -c ox-msg -n "__fish_seen_subcommand_from send" -s r -l reply-to -x -d 'The message ID this one answers'
complete -c ox-msg -n "__fish_seen_subcommand_from ls" -s u -l unread -d 'Only messages not received yet'
complete -c ox-msg -n "__fish_seen_subcommand_from recv" -s f -l follow -d 'Wait for new messages'
complete -c ox-msg -n "__fish_seen_subcommand_from recv" -s n -x -d 'Stop after N messages'
complete -c ox-msg -n "__fish_seen_subcommand_from recv" -s w -l wait -x -d 'Wait up to DUR for a first message'
complete -c ox-msg -n "__fish_seen_subcommand_from recv" -l peek -d 'Leave the messages unread'
