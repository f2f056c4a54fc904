# fish completion for ox-skill(1)

set -l subs ls add show rm
complete -c ox-skill -f
complete -c ox-skill -n "not __fish_seen_subcommand_from $subs" -a ls -d "list the agent's skills (or the shipped ones with --shared)"
complete -c ox-skill -n "not __fish_seen_subcommand_from $subs" -a add -d 'install skills from folders, or shipped skills by name'
complete -c ox-skill -n "not __fish_seen_subcommand_from $subs" -a show -d "print a skill's SKILL.md"
complete -c ox-skill -n "not __fish_seen_subcommand_from $subs" -a rm -d 'remove skills from the agent'
complete -c ox-skill -s a -l agent -x -d 'the agent NAME'
complete -c ox-skill -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-skill -l json -d 'print JSON lines even on a terminal'
complete -c ox-skill -n "__fish_seen_subcommand_from ls show" -l shared -d 'the skills shipped with Oxios'
complete -c ox-skill -n "__fish_seen_subcommand_from add" -s f -l force -d 'replace a skill the agent has already'
complete -c ox-skill -n "__fish_seen_subcommand_from add" -F -a '(ox-skill ls --shared --json 2>/dev/null | string replace -rf \'^\{"type":"skill","name":"([a-z0-9-]+)".*\' \'$1\')'
complete -c ox-skill -s h -l help -d 'show help'
complete -c ox-skill -s v -l version -d 'print the version'
