package security

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sluice-io/sluice/internal/config"
)

// PrincipalMapper turns the subject DN of a verified TLS client
// certificate into a principal name by Kafka's ssl.principal.mapping.rules
// (KIP-371, Kafka's SslPrincipalMapper): a comma-separated list of
// RULE:pattern/replacement/ (optionally followed by L or U for lower or
// upper case) and DEFAULT (the DN unchanged). Rules are tried in order; the
// first whose pattern matches the whole DN gives the name; if none does,
// the connection's authentication fails, as in Kafka's
// DefaultKafkaPrincipalBuilder.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault  bool
	text       string         // as written, for errors
	whole      *regexp.Regexp // ^(?:pattern)$: Java's Matcher.matches
	pattern    *regexp.Regexp // as written: Java's String.replaceAll
	repl       string
	lower, upp bool
}

// rulePattern is the grammar of one rule in Kafka's SslPrincipalMapper:
// DEFAULT, RULE:pattern/replacement/[LU] (a backslash escapes / inside
// pattern and replacement), or anything else (rejected unless empty).
const rulePattern = `(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	// ruleSplitter finds the rules of the list: a comma ends a rule only
	// where the rule's grammar allows, so patterns may contain commas.
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(?:,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// ParsePrincipalMappingRules parses a value of ssl.principal.mapping.rules.
// An empty value means DEFAULT. Patterns are Java regular expressions
// compiled with Go's regexp (RE2): one Go cannot compile (backreferences,
// lookaround) is an error here rather than at the first connection.
func ParsePrincipalMappingRules(value string) (*PrincipalMapper, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		value = "DEFAULT"
	}
	m := &PrincipalMapper{}
	for _, sm := range ruleSplitter.FindAllStringSubmatch(value, -1) {
		text := sm[1]
		loc := ruleParser.FindStringSubmatchIndex(text)
		if loc == nil || loc[1] != len(text) {
			end := 0
			if loc != nil {
				end = loc[1]
			}
			return nil, fmt.Errorf("invalid rule `%s`, unmatched substring `%s`", text, text[end:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return text[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, mappingRule{isDefault: true, text: text})
			continue
		}
		pat, ok := group(2)
		if !ok {
			continue // an empty rule (",,") is ignored, as in Kafka
		}
		repl, _ := group(3)
		caseFlag, _ := group(4)
		r := mappingRule{text: text, repl: repl, lower: caseFlag == "L", upp: caseFlag == "U"}
		var err error
		if r.pattern, err = regexp.Compile(pat); err != nil {
			return nil, fmt.Errorf("rule `%s`: pattern: %v", text, err)
		}
		r.whole = regexp.MustCompile(`^(?:` + pat + `)$`)
		if err := checkReplacement(repl, r.pattern.NumSubexp()); err != nil {
			return nil, fmt.Errorf("rule `%s`: %v", text, err)
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// ListenerPrincipalMapper parses the listener's ssl.principal.mapping.rules
// (listener.name.<listener>.ssl.principal.mapping.rules overriding it).
func ListenerPrincipalMapper(cfg *config.Broker, listener string) (*PrincipalMapper, error) {
	v := cfg.Setting(listener, "ssl.principal.mapping.rules")
	m, err := ParsePrincipalMappingRules(v)
	if err != nil {
		key := "ssl.principal.mapping.rules"
		if _, ok := cfg.Props["listener.name."+strings.ToLower(listener)+"."+key]; ok {
			key = "listener.name." + strings.ToLower(listener) + "." + key
		}
		return nil, fmt.Errorf("listener %s: %s: %v", listener, key, err)
	}
	return m, nil
}

// ErrNoMatchingRule is returned (wrapped) by Map when no rule matches the
// DN (Kafka's SslPrincipalMapper.NoMatchingRule).
var ErrNoMatchingRule = errors.New("no ssl.principal.mapping.rules rule applies")

// Map returns the principal name (without "User:") of a DN in RFC 2253
// form (SubjectDN).
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %s", ErrNoMatchingRule, dn)
}

// MapCertificate maps the subject of a client certificate (Map of
// SubjectDN).
func (m *PrincipalMapper) MapCertificate(cert *x509.Certificate) (string, error) {
	return m.Map(SubjectDN(cert))
}

// String lists the rules as parsed.
func (m *PrincipalMapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		parts[i] = r.text
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// apply follows Kafka's rule: if the pattern matches the whole DN, the
// result is the DN with every match of the pattern replaced (Java's
// String.replaceAll), then cased. One difference: Go's regexp skips an
// empty match right after a previous match, which Java's replaceAll
// replaces too (an unanchored ".*" gives the replacement twice in Kafka,
// once here); anchor patterns with ^ and $ as Kafka's examples do.
func (r mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, loc := range r.pattern.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		expandJava(&b, r.repl, dn, loc)
		last = loc[1]
	}
	b.WriteString(dn[last:])
	out := b.String()
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upp:
		out = strings.ToUpper(out)
	}
	return out, true
}

// checkReplacement rejects what Java's Matcher.appendReplacement would
// throw on at every connection: a trailing backslash, a $ not followed by
// a group number, a group reference when the pattern has no group.
// ${name} is not supported.
func checkReplacement(repl string, groups int) error {
	for i := 0; i < len(repl); i++ {
		switch repl[i] {
		case '\\':
			if i++; i == len(repl) {
				return errors.New("replacement ends with a backslash")
			}
		case '$':
			if i+1 == len(repl) || repl[i+1] < '0' || repl[i+1] > '9' {
				return errors.New("replacement: $ must be followed by a group number (escape it as \\$)")
			}
			if d := int(repl[i+1] - '0'); d > groups && groups == 0 {
				return fmt.Errorf("replacement refers to group %d, the pattern has no group", d)
			}
		}
	}
	return nil
}

// expandJava writes repl for the match loc of dn as Java's
// Matcher.appendReplacement does, after Kafka's escaping of references to
// groups the pattern does not have: \c is c; $n takes as many digits as
// still name an existing group ($12 with 3 groups is group 1, then "2");
// $n with n above the group count is the literal text.
func expandJava(b *strings.Builder, repl, dn string, loc []int) {
	groups := len(loc)/2 - 1
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\' && i+1 < len(repl):
			i++
			b.WriteByte(repl[i])
		case c == '$' && i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9':
			n := int(repl[i+1] - '0')
			if n > groups {
				b.WriteByte('$')
				continue
			}
			i++
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' {
				next := n*10 + int(repl[i+1]-'0')
				if next > groups {
					break
				}
				n = next
				i++
			}
			if loc[2*n] >= 0 {
				b.WriteString(dn[loc[2*n]:loc[2*n+1]])
			}
		default:
			b.WriteByte(c)
		}
	}
}

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// (RFC 2253 form) writes by name; others are written as a dotted OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

type rawRDNSET []rawATV

// SubjectDN returns the certificate's subject as Kafka's principal builder
// sees it, Java's X500Principal.getName() (RFC 2253): the RDNs last to
// first, AVAs of one RDN joined with "+", CN, C, L, ST, O, OU, STREET, DC
// and UID by name with their string value escaped (, + " \ < > ; and a
// leading # or space, a trailing space), any other attribute as
// <dotted OID>=#<hex of its DER value>. Go's pkix.Name.String() differs:
// it names SERIALNUMBER and POSTALCODE (Java writes their OIDs), writes
// DC and UID as OIDs, and re-encodes values instead of using the
// certificate's bytes. Java also orders the AVAs of a multi-valued RDN
// canonically; they are kept in certificate order here.
func SubjectDN(cert *x509.Certificate) string {
	var seq []rawRDNSET
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil || len(rest) > 0 {
		return cert.Subject.String()
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			name, known := rfc2253Keywords[atv.Type.String()]
			if s, ok := stringValue(atv.Value); known && ok {
				b.WriteString(name + "=" + escapeDN(s))
				continue
			}
			if !known {
				name = atv.Type.String()
			}
			b.WriteString(name + "=#" + hex.EncodeToString(atv.Value.FullBytes))
		}
	}
	return b.String()
}

// stringValue decodes a directory string value (PrintableString,
// UTF8String, IA5String, T61String, BMPString).
func stringValue(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagUTF8String, asn1.TagIA5String, asn1.TagT61String:
		if !utf8.Valid(v.Bytes) {
			return "", false
		}
		return string(v.Bytes), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		r := make([]rune, 0, len(v.Bytes)/2)
		for i := 0; i < len(v.Bytes); i += 2 {
			r = append(r, rune(v.Bytes[i])<<8|rune(v.Bytes[i+1]))
		}
		return string(r), true
	}
	return "", false
}

// escapeDN escapes an attribute value as RFC 2253 section 2.4 asks.
func escapeDN(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(",+\"\\<>;", c) >= 0,
			i == 0 && (c == '#' || c == ' '),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
