package compare

// BlockOf is blockOf for the external tests.
var BlockOf = blockOf
