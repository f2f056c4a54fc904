# fish completion for ox-top(1)

complete -c ox-top -f
complete -c ox-top -s n -l count -x -d 'stop after COUNT samples'
complete -c ox-top -s d -l interval -x -d 'the time between samples'
complete -c ox-top -s a -l agent -x -d 'only the runs of agent NAME'
complete -c ox-top -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-top -l json -d 'print JSON lines even on a terminal'
complete -c ox-top -s h -l help -d 'show help'
complete -c ox-top -s v -l version -d 'print the version'
