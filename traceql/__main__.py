from traceql.cli import main

main()
