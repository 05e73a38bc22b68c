module kaio.dev/kaio

go 1.19
