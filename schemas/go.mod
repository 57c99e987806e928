module github.com/fiskfleet/fiskfleet/schemas

go 1.26.0
