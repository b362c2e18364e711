package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// The decoder below replaces encoding/json for stack config. encoding/json matches
// field names without regard to case (so `Members` would set members, and the last of
// two spellings would win), stops at the first type error and reports it against the
// whole section. Here keys match exactly, every problem is reported at its key path,
// and a value given in the config, zero or empty included, is never replaced by a
// default: the defaults are in place before the config is decoded over them.

// jsonKind is the type of one JSON value.
type jsonKind int

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a parsed JSON value that keeps the order of object keys and any key
// given twice.
type jsonValue struct {
	kind   jsonKind
	text   string // a string's value, or a number's literal
	truth  bool
	items  []*jsonValue
	keys   []string // object keys in order, without repeats
	fields map[string]*jsonValue
	twice  []keyValue // object keys given again, with the value given again
}

type keyValue struct {
	key   string
	value *jsonValue
}

func parseJSON(raw string) (*jsonValue, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	v, err := parseJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("text after the value")
	}
	return v, nil
}

func parseJSONValue(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool, truth: t}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, text: t.String()}, nil
	case string:
		return &jsonValue{kind: jsonString, text: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jsonValue{kind: jsonArray}
			for dec.More() {
				item, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token()
			return v, err
		case '{':
			v := &jsonValue{kind: jsonObject, fields: map[string]*jsonValue{}}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := keyTok.(string)
				item, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				if _, seen := v.fields[key]; seen {
					v.twice = append(v.twice, keyValue{key, item})
					continue
				}
				v.keys = append(v.keys, key)
				v.fields[key] = item
			}
			_, err := dec.Token()
			return v, err
		}
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// String is the value as an error message shows it: a string as it is, anything else
// as compact JSON.
func (v *jsonValue) String() string {
	if v.kind == jsonString {
		return v.text
	}
	var b bytes.Buffer
	v.writeJSON(&b)
	return b.String()
}

func (v *jsonValue) writeJSON(b *bytes.Buffer) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		b.WriteString(strconv.FormatBool(v.truth))
	case jsonNumber:
		b.WriteString(v.text)
	case jsonString:
		quoted, _ := json.Marshal(v.text)
		b.Write(quoted)
	case jsonArray:
		b.WriteByte('[')
		for i, item := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			item.writeJSON(b)
		}
		b.WriteByte(']')
	case jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			quoted, _ := json.Marshal(k)
			b.Write(quoted)
			b.WriteByte(':')
			v.fields[k].writeJSON(b)
		}
		b.WriteByte('}')
	}
}

// decoder decodes jsonValues into the typed Config over its defaults.
type decoder struct {
	errs Errors
	// given holds every key path the config sets.
	given map[string]bool
	// failed holds the key paths refused while decoding; validation does not report
	// them again (their field kept its default).
	failed map[string]bool
}

func newDecoder() *decoder {
	return &decoder{given: map[string]bool{}, failed: map[string]bool{}}
}

func (d *decoder) refuse(rule *Rule, path string, v *jsonValue, format string, args ...any) {
	d.errs.addf(rule, path, v.String(), format, args...)
	d.failed[path] = true
}

// decode sets dst (a field of the Config) from v. Structs are merged key by key, so the
// defaults of keys the config leaves out stay in place.
func (d *decoder) decode(path string, v *jsonValue, dst reflect.Value) {
	d.given[path] = true
	if v.kind == jsonNull {
		d.refuse(ruleType, path, v, "must be %s, not null (leave the key out for its default)", typeName(dst.Type()))
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(newWithDefaults(dst.Type().Elem()).Addr())
		}
		d.decode(path, v, dst.Elem())
	case reflect.Struct:
		d.decodeStruct(path, v, dst)
	case reflect.Slice:
		if v.kind != jsonArray {
			d.refuse(ruleType, path, v, "must be %s", typeName(dst.Type()))
			return
		}
		list := reflect.MakeSlice(dst.Type(), len(v.items), len(v.items))
		for i, item := range v.items {
			list.Index(i).Set(newWithDefaults(dst.Type().Elem()))
			d.decode(fmt.Sprintf("%s[%d]", path, i), item, list.Index(i))
		}
		dst.Set(list)
	case reflect.String:
		if v.kind != jsonString {
			d.refuse(ruleType, path, v, "must be %s", typeName(dst.Type()))
			return
		}
		dst.SetString(v.text)
	case reflect.Int:
		n, err := strconv.ParseInt(v.text, 10, 32)
		if v.kind != jsonNumber || err != nil {
			d.refuse(ruleType, path, v, "must be %s", typeName(dst.Type()))
			return
		}
		dst.SetInt(n)
	case reflect.Bool:
		if v.kind != jsonBool {
			d.refuse(ruleType, path, v, "must be %s", typeName(dst.Type()))
			return
		}
		dst.SetBool(v.truth)
	default:
		panic(fmt.Sprintf("config: no decoding for %s at %s", dst.Type(), path))
	}
}

func (d *decoder) decodeStruct(path string, v *jsonValue, dst reflect.Value) {
	fields := jsonFields(dst.Type())
	if v.kind != jsonObject {
		d.refuse(ruleType, path, v, "must be a mapping with the keys %s", strings.Join(fieldNames(fields), ", "))
		return
	}
	for _, again := range v.twice {
		d.errs.addf(ruleDuplicateKey, path+"."+again.key, again.value.String(), "is given more than once in %s", path)
		d.failed[path+"."+again.key] = true
	}
	for _, k := range v.keys {
		item, keyPath := v.fields[k], path+"."+k
		index, ok := fields[k]
		if !ok {
			d.refuse(ruleUnknownKey, keyPath, item, "%s", unknownKeyRule(k, path, fieldNames(fields)))
			continue
		}
		d.decode(keyPath, item, dst.FieldByIndex(index))
	}
}

// unknownKeyRule says why key is refused in section, naming a key that differs only
// in capitals.
func unknownKeyRule(key, section string, known []string) string {
	where := "a railgrid-kcp config key"
	if section != "" {
		where = "a key of " + section
	}
	rule := fmt.Sprintf("is not %s; known keys: %s", where, strings.Join(known, ", "))
	for _, k := range known {
		if strings.EqualFold(k, key) {
			rule += fmt.Sprintf(" (keys are matched exactly, capitals included: did you mean %s?)", k)
		}
	}
	return rule
}

// jsonFields maps the JSON names of a struct's fields to their index, flattening
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for inner, index := range jsonFields(f.Type) {
				out[inner] = append([]int{i}, index...)
			}
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = []int{i}
	}
	return out
}

// fieldNames are a struct's JSON names in declaration order.
func fieldNames(fields map[string][]int) []string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := fields[names[i]], fields[names[j]]
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	return names
}

// typeName says what a value of Go type t is written as in a stack file.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Struct:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	}
	return t.String()
}
