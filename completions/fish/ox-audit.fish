# fish completion for ox-audit(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_audit_cmds log tail show verify export head

complete -c ox-audit -f
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -s h -l help -d 'Show help'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -s v -l version -d 'Print the version'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a log -d 'Print entries, oldest first'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a tail -d 'Print the last entries; with -f, follow new ones'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a show -d 'Print the entry SEQ'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a verify -d 'Recompute the hash chain'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a export -d 'Write the whole log and its head to stdout'
complete -c ox-audit -n "not __fish_seen_subcommand_from $__ox_audit_cmds" -a head -d 'Print the head (last seq and hash)'

# Every subcommand.
complete -c ox-audit -n "__fish_seen_subcommand_from $__ox_audit_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-audit -n "__fish_seen_subcommand_from $__ox_audit_cmds" -s h -l help -d 'Show help'
complete -c ox-audit -n "__fish_seen_subcommand_from log tail show verify head" -l json -d 'Print JSON lines even on a terminal'

# log and tail: filters.
set -l __ox_audit_ops state.save state.delete state.load state.list version.commit version.tag version.restore version.log version.show version.diff audit.log audit.head audit.verify audit.export connect
complete -c ox-audit -n "__fish_seen_subcommand_from log tail" -s a -l agent -x -a '(__ox_agent_names)' -d 'Only entries about or by agent NAME'
complete -c ox-audit -n "__fish_seen_subcommand_from log tail" -l op -x -a "$__ox_audit_ops" -d 'Only entries of op OP (a glob)'
complete -c ox-audit -n "__fish_seen_subcommand_from log tail" -l since -x -d 'Start at entry SEQ, a time or an age (2h)'
complete -c ox-audit -n "__fish_seen_subcommand_from log" -s n -x -d 'Only the last N selected entries'
complete -c ox-audit -n "__fish_seen_subcommand_from tail" -s n -x -d 'Print the last N entries first'
complete -c ox-audit -n "__fish_seen_subcommand_from tail" -s f -l follow -d 'Wait for new entries and print them'
complete -c ox-audit -n "__fish_seen_subcommand_from tail" -s F -l fleet -d 'The entries of every node of the fleet'
complete -c ox-audit -n "__fish_seen_subcommand_from verify" -l local -d 'Do not hold the log to the heads fleet peers witnessed'

# verify: what to check.
complete -c ox-audit -n "__fish_seen_subcommand_from verify" -l data -x -a '(__fish_complete_directories)' -d 'Verify data dir DIR offline'
complete -c ox-audit -n "__fish_seen_subcommand_from verify" -l file -r -F -d "Verify the export FILE ('-': stdin)"
