package fiskapp

// AwaitExit is awaitExit for the external tests.
var AwaitExit = awaitExit
