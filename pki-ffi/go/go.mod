module pki.invalid/go

go 1.22
