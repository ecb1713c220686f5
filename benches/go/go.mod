module pki.invalid/benches/go

go 1.26
