# fish completion for ox-schedule(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_schedule_cmds add ls rm run enable disable

complete -c ox-schedule -f
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -s h -l help -d 'Show help'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -s v -l version -d 'Print the version'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a add -d 'Add a job that runs COMMAND (after --) or TASK on a schedule'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a ls -d 'List the jobs, with their next and last runs'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a rm -d 'Remove job NAME'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a run -d 'Run job NAME now, once'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a enable -d 'Enable job NAME'
complete -c ox-schedule -n "not __fish_seen_subcommand_from $__ox_schedule_cmds" -a disable -d 'Disable job NAME'

complete -c ox-schedule -n "__fish_seen_subcommand_from $__ox_schedule_cmds" -s a -l agent -x -a '(__ox_agent_names)' -d 'Act on agent NAME'
complete -c ox-schedule -n "__fish_seen_subcommand_from $__ox_schedule_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-schedule -n "__fish_seen_subcommand_from $__ox_schedule_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-schedule -n "__fish_seen_subcommand_from $__ox_schedule_cmds" -s h -l help -d 'Show help'

complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l name -x -d 'The job\'s NAME, unique among all jobs'
complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l cron -x -a '@hourly @daily @weekly @monthly @yearly @every @message @messages' -d 'When: 5 cron fields or a descriptor'
complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l tz -x -d 'Read the schedule in time ZONE'
complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l priority -x -d 'The priority of the job\'s runs'
complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l overlap -x -a 'skip queue allow' -d 'When due while the last run still runs'
complete -c ox-schedule -n "__fish_seen_subcommand_from add" -l catch-up -d 'Run once at start when a due time passed while oxiosd was down'
complete -c ox-schedule -n "__fish_seen_subcommand_from rm run enable disable" -a '(ox-schedule ls --json 2>/dev/null | string replace -rf \'^.*"name":"([^"]*)".*$\' \'$1\')' -d 'Job'
