package config

// LogSource is one log file to follow.
type LogSource struct {
	Path string `yaml:"path"`
	Type string `yaml:"type"`
}

// Validate checks a log source on its own.
func (l *LogSource) Validate() error {
	if l.Path == "" {
		return fieldErr("path is required", "path")
	}
	switch l.Type {
	case "kdc", "kadmind":
	default:
		return fieldErr(`type must be "kdc" or "kadmind"`, "type")
	}
	return nil
}
