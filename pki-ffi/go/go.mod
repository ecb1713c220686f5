module example.invalid/pki/pki-ffi/go

go 1.22
