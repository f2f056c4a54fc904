# fish completion for ox-status(1)

complete -c ox-status -f
complete -c ox-status -l config -r -F -d 'the config FILE to check'
complete -c ox-status -l timeout -x -d 'how long each check may take'
complete -c ox-status -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-status -l json -d 'print JSON lines even on a terminal'
complete -c ox-status -s h -l help -d 'show help'
complete -c ox-status -s v -l version -d 'print the version'
