module github.com/Microsoft/cosesign1go

go 1.24
