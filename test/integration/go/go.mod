module memtallygotest

go 1.19
