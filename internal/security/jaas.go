package security

import (
	"errors"
	"fmt"
	"strings"
)

// JAAS is one login module of a sasl.jaas.config value (Kafka's
// JaasConfig): `<LoginModule class> <flag> key="value" ...;`.
type JAAS struct {
	// Module is the login module class, e.g.
	// org.apache.kafka.common.security.plain.PlainLoginModule.
	Module string
	// Flag is the control flag: required, requisite, sufficient or
	// optional.
	Flag string
	// Options are the key=value options in order of appearance (a
	// repeated key keeps its last value).
	Options map[string]string
}

// Limits of a JAAS configuration.
const (
	maxJAASBytes   = 1 << 20
	maxJAASOptions = 100000
)

// Login modules sluice reads (Kafka's class names).
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// ParseJAAS parses a sasl.jaas.config value holding exactly one login
// module, as Kafka requires of the property. Values may be bare words or
// double-quoted strings with backslash escapes. It never panics; errors
// do not quote the text (it holds passwords).
func ParseJAAS(text string) (JAAS, error) {
	if len(text) > maxJAASBytes {
		return JAAS{}, fmt.Errorf("JAAS configuration longer than %d bytes", maxJAASBytes)
	}
	lx := &jaasLexer{s: text}
	var j JAAS
	tok, kind := lx.next()
	if kind != tokWord {
		return JAAS{}, errors.New("JAAS configuration: expected a login module class")
	}
	j.Module = tok
	if j.Flag, kind = lx.next(); kind != tokWord {
		return JAAS{}, errors.New("JAAS configuration: expected a control flag after the login module")
	}
	switch strings.ToLower(j.Flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return JAAS{}, errors.New("JAAS configuration: the control flag must be required, requisite, sufficient or optional")
	}
	j.Options = map[string]string{}
	for {
		key, kind := lx.next()
		switch kind {
		case tokSemi:
			if _, k := lx.next(); k != tokEOF {
				return JAAS{}, errors.New("JAAS configuration: exactly one login module is allowed")
			}
			return j, nil
		case tokWord:
		case tokErr:
			return JAAS{}, fmt.Errorf("JAAS configuration: %s", key)
		default:
			return JAAS{}, errors.New("JAAS configuration: expected key=value or ';'")
		}
		if _, k := lx.next(); k != tokEq {
			return JAAS{}, errors.New("JAAS configuration: expected '=' after an option name")
		}
		val, k := lx.next()
		if k == tokErr {
			return JAAS{}, fmt.Errorf("JAAS configuration: %s", val)
		}
		if k != tokWord && k != tokString {
			return JAAS{}, errors.New("JAAS configuration: expected a value after '='")
		}
		if len(j.Options) >= maxJAASOptions {
			return JAAS{}, fmt.Errorf("JAAS configuration: more than %d options", maxJAASOptions)
		}
		j.Options[key] = val
	}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokString
	tokEq
	tokSemi
	tokErr
)

type jaasLexer struct {
	s string
	i int
}

func (lx *jaasLexer) next() (string, tokKind) {
	for lx.i < len(lx.s) && isSpace(lx.s[lx.i]) {
		lx.i++
	}
	if lx.i >= len(lx.s) {
		return "", tokEOF
	}
	switch c := lx.s[lx.i]; c {
	case '=':
		lx.i++
		return "=", tokEq
	case ';':
		lx.i++
		return ";", tokSemi
	case '"':
		lx.i++
		var sb strings.Builder
		for lx.i < len(lx.s) {
			c := lx.s[lx.i]
			lx.i++
			switch c {
			case '"':
				return sb.String(), tokString
			case '\\':
				if lx.i >= len(lx.s) {
					return "unterminated escape", tokErr
				}
				e := lx.s[lx.i]
				lx.i++
				switch e {
				case 'n':
					sb.WriteByte('\n')
				case 't':
					sb.WriteByte('\t')
				case 'r':
					sb.WriteByte('\r')
				default:
					sb.WriteByte(e)
				}
			default:
				sb.WriteByte(c)
			}
		}
		return "unterminated quoted value", tokErr
	}
	start := lx.i
	for lx.i < len(lx.s) && !isSpace(lx.s[lx.i]) && !strings.ContainsRune("=;\"", rune(lx.s[lx.i])) {
		lx.i++
	}
	return lx.s[start:lx.i], tokWord
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
