# fish completion for ox-ps(1)

complete -c ox-ps -f
complete -c ox-ps -l all -d 'include the ended runs'
complete -c ox-ps -s a -l agent -x -d 'only the runs of agent NAME'
complete -c ox-ps -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-ps -l json -d 'print JSON lines even on a terminal'
complete -c ox-ps -s h -l help -d 'show help'
complete -c ox-ps -s v -l version -d 'print the version'
