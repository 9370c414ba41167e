package pgconn

import (
	"net/url"
	"regexp"
	"strings"
)

// The masked form of every secret.
const mask = "xxxxx"

// secretKeys are the connection parameters whose values are secrets.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// redactErr renders err on one line with every secret in dsn masked.
func redactErr(err error, dsn string) string {
	msg := oneLine(err.Error())
	for _, s := range secrets(dsn) {
		msg = strings.ReplaceAll(msg, s, mask)
	}
	return msg
}

// Redact returns dsn with its password masked, safe to print: a URL's
// userinfo password and password/sslpassword query parameters, or a
// keyword/value string's password values (quoted, escaped or spaced as
// libpq allows). What cannot be parsed is masked from the first sign of a
// secret to the end rather than echoed.
func Redact(dsn string) string {
	if strings.Contains(dsn, "://") {
		return redactURL(dsn)
	}
	return redactKV(dsn)
}

func redactURL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), mask)
			}
		}
		q := u.Query()
		changed := false
		for k := range q {
			if secretKeys[k] {
				q.Set(k, mask)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// Not parseable as a URL (a bad port, an unescaped '@' in the
	// password): mask by hand. The userinfo ends at the last '@' (a
	// password may hold '@' or '/'; masking too much is harmless).
	scheme, rest, _ := strings.Cut(dsn, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPW := strings.Cut(rest[:at], ":"); hasPW {
			rest = user + ":" + mask + rest[at:]
		}
	}
	return scheme + "://" + querySecret.ReplaceAllString(rest, "${1}"+mask)
}

var querySecret = regexp.MustCompile(`([?&](?:ssl)?password=)[^&#]*`)

func redactKV(dsn string) string {
	params, ok := parseKV(dsn)
	var b strings.Builder
	last := 0
	for _, p := range params {
		if secretKeys[p.key] {
			b.WriteString(dsn[last:p.start])
			b.WriteString(mask)
			last = p.end
		}
	}
	if !ok {
		// Unterminated quote or a stray word: nothing after the first
		// secret keyword still unmasked is shown.
		if i := firstSecretKey(dsn[last:]); i >= 0 {
			b.WriteString(dsn[last : last+i])
			b.WriteString(mask)
			return b.String()
		}
	}
	b.WriteString(dsn[last:])
	return b.String()
}

func firstSecretKey(s string) int {
	i := strings.Index(s, "password")
	if j := strings.Index(s, "sslpassword"); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	return i
}

// secrets lists every secret dsn carries, as written and as decoded, for
// masking in error texts (which may quote either).
func secrets(dsn string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			if u.User != nil {
				pw, _ := u.User.Password()
				add(pw)
			}
			for k, vs := range u.Query() {
				if secretKeys[k] {
					for _, v := range vs {
						add(v)
					}
				}
			}
		}
		// By hand too: the raw (escaped) forms, and URLs url.Parse refuses.
		_, rest, _ := strings.Cut(dsn, "://")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
				if dec, err := url.PathUnescape(pw); err == nil {
					add(dec)
				}
			}
		}
		for _, m := range querySecret.FindAllStringSubmatchIndex(dsn, -1) {
			raw := dsn[m[3]:m[1]]
			add(raw)
			if dec, err := url.QueryUnescape(raw); err == nil {
				add(dec)
			}
		}
		return out
	}
	params, ok := parseKV(dsn)
	for _, p := range params {
		if secretKeys[p.key] {
			add(p.value)
			add(dsn[p.start:p.end])
		}
	}
	if !ok {
		if i := firstSecretKey(dsn); i >= 0 {
			// Whatever follows the keyword and its '=', whole and word by word.
			_, rest, _ := strings.Cut(dsn[i:], "=")
			rest = strings.TrimSpace(rest)
			add(strings.Trim(rest, "'"))
			for _, w := range strings.Fields(rest) {
				add(strings.Trim(w, "'"))
			}
		}
	}
	return out
}

type kvParam struct {
	key        string
	value      string // decoded
	start, end int    // the value as written, quotes included
}

// parseKV parses a libpq keyword/value connection string: keyword, '='
// with optional spaces around it, then a value that is either a run of
// non-space characters or single-quoted; in both a backslash escapes the
// next character. ok is false when the string does not follow that shape
// (params then holds what parsed before).
func parseKV(s string) (params []kvParam, ok bool) {
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return params, true
		}
		k := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
			i++
		}
		key := s[k:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return params, false
		}
		i++
		skip()
		p := kvParam{key: key, start: i}
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					v.WriteByte(s[i+1])
					i += 2
					continue
				}
				i++
				if c == '\'' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return params, false
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
		}
		p.end, p.value = i, v.String()
		params = append(params, p)
	}
}
