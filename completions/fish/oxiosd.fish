# fish completion for oxiosd(8)

complete -c oxiosd -f
complete -c oxiosd -l config -r -F -d 'Read configuration from FILE ("" for none)'
complete -c oxiosd -l data -r -xa '(__fish_complete_directories)' -d 'Data directory'
complete -c oxiosd -l socket -r -F -d 'Listen on the Unix socket PATH'
complete -c oxiosd -l mount -r -xa '(__fish_complete_directories)' -d "Mount the agents' filesystem at DIR"
complete -c oxiosd -l no-mount -d "Do not mount the agents' filesystem"
complete -c oxiosd -l log-level -x -a 'debug info warn error' -d 'Log level'
complete -c oxiosd -l recover -d 'Start with what a damaged or missing journal still holds'
complete -c oxiosd -s h -l help -d 'Show help'
complete -c oxiosd -s v -l version -d 'Print the version'
