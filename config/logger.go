package config

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogLevel parses a log_level value.
func LogLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error, not %q", s)
}

// Logger is `worker run`'s logger: JSON lines on w at c's log_level with ISO-8601 timestamps.
// It also takes over the standard library's log package (where gocloud, the NATS server and
// other libraries write), so that no plain-text line interleaves with the JSON; restore gives
// the log package back.
func (c *Config) Logger(w io.Writer) (log *zap.Logger, restore func(), err error) {
	level, err := LogLevel(c.LogLevel)
	if err != nil {
		return nil, nil, &Error{Setting: "log_level", Source: "config", Reason: err.Error()}
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), level)
	log = zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w))))
	// At warn: a library that prints unasked is usually complaining, and at info its lines
	// would vanish under log_level warn.
	undo, err := zap.RedirectStdLogAt(log.Named("stdlog"), zapcore.WarnLevel)
	if err != nil {
		return nil, nil, err
	}
	return log, undo, nil
}
