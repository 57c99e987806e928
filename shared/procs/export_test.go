package procs

// InheritedEnv is inheritedEnv, for the helper process of the tests.
const InheritedEnv = inheritedEnv
