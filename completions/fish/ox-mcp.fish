# fish completion for ox-mcp(1)

complete -c ox-mcp -f
complete -c ox-mcp -s a -l agent -x -d 'serve agent NAME'
complete -c ox-mcp -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-mcp -l http -x -d 'serve streamable HTTP on ADDR (unix:PATH or 127.0.0.1:PORT)'
complete -c ox-mcp -s h -l help -d 'show help'
complete -c ox-mcp -s v -l version -d 'print the version'
