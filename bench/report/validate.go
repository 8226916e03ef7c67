package report

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Bounds of what a run read back may hold: results directories travel
// between machines and people, and the comparison sizes its work from
// them (a load's blocks from its wall time, the differences of two
// metrics' repetitions from their number), so report.json and the raw
// CSVs are input, checked before anything is made from them.
const (
	// MaxCount bounds bench --count, and so a metric's repetitions and
	// a test's repeats in report.json: 20 repetitions of the default
	// loads take about half an hour.
	MaxCount = 20
	// MaxWall bounds a load's wall time, and a request's start and
	// latency in it.
	MaxWall = 24 * time.Hour
	// maxValues bounds any other list of report.json (rounds, samples,
	// tries, levels): a day of once-a-second samples.
	maxValues = 86400
	// maxRecords bounds the requests read back for one run (about 48
	// bytes each: an hour's load at 9,000/s); a load holds at most the
	// requests report.json says it made.
	maxRecords = 1 << 25
)

// validate checks everything of rep read from report.json: every number
// finite, every count and duration >= 0, every load's wall time in (0,
// MaxWall], repetitions at most MaxCount, lists at most maxValues. The
// error names the field as report.json spells it (as.wall_ns,
// metrics[0].repeats).
func validate(rep *Report) error {
	return walk(reflect.ValueOf(rep).Elem(), "")
}

var (
	loadType     = reflect.TypeFor[Load]()
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

func walk(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %g is not a number", path, f)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := v.Int(); n < 0 {
			if v.Type() == durationType {
				return fmt.Errorf("%s: negative duration %d ns", path, n)
			}
			return fmt.Errorf("%s: negative count %d", path, n)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return walk(v.Elem(), path)
		}
	case reflect.Slice:
		limit := maxValues
		if strings.HasSuffix(path, ".repeats") {
			limit = MaxCount
		}
		if v.Len() > limit {
			return fmt.Errorf("%s: %d values, at most %d", path, v.Len(), limit)
		}
		for i := range v.Len() {
			if err := walk(v.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Len() > maxValues {
			return fmt.Errorf("%s: %d values, at most %d", path, v.Len(), maxValues)
		}
		for it := v.MapRange(); it.Next(); {
			if err := walk(it.Value(), path+"."+fmt.Sprint(it.Key())); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if v.Type() == timeType {
			return nil
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue // not read from report.json
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			if err := walk(v.Field(i), p); err != nil {
				return err
			}
		}
		if err := counts(v, path); err != nil {
			return err
		}
	}
	return nil
}

// counts checks the fields of one struct whose bounds are more than >= 0.
func counts(v reflect.Value, path string) error {
	bad := func(field string, got any, want string) error {
		if path != "" {
			field = path + "." + field
		}
		return fmt.Errorf("%s: %v, want %s", field, got, want)
	}
	switch x := v.Addr().Interface().(type) {
	case *Load:
		if x.Wall <= 0 || x.Wall > MaxWall {
			return bad("wall_ns", int64(x.Wall), fmt.Sprintf("a wall time in (0, %s]", MaxWall))
		}
		if x.Requests > maxRecords {
			return bad("requests", x.Requests, fmt.Sprintf("at most %d", maxRecords))
		}
	case *TestResult:
		if x.Repeats > MaxCount || x.Detail > max(1, x.Repeats) {
			return bad("repeats", fmt.Sprintf("%d (detail %d)", x.Repeats, x.Detail), fmt.Sprintf("at most %d, the detail one of them", MaxCount))
		}
	case *Settings:
		if x.Count > MaxCount {
			return bad("count", x.Count, fmt.Sprintf("at most %d", MaxCount))
		}
	}
	return nil
}
