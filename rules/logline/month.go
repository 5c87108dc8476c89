package logline

import "strings"

// months maps the month abbreviations of syslog and `dmesg -T` in the locales GPU
// clusters commonly run (lower case, without a trailing dot) to their number.
var months = map[string]int{}

func init() {
	for m, names := range [12][]string{
		{"jan", "january", "jän", "janv", "ene", "gen", "sty", "янв"},
		{"feb", "february", "febr", "févr", "fév", "fev", "lut", "фев"},
		{"mar", "march", "mär", "märz", "mars", "mrt", "мар"},
		{"apr", "april", "avr", "abr", "kwi", "апр"},
		{"may", "mai", "mag", "mei", "maj", "мая", "май"},
		{"jun", "june", "juni", "juin", "giu", "cze", "июн"},
		{"jul", "july", "juli", "juil", "lug", "lip", "июл"},
		{"aug", "august", "août", "ago", "sie", "авг"},
		{"sep", "sept", "september", "set", "wrz", "сен"},
		{"oct", "october", "okt", "ott", "out", "paź", "окт"},
		{"nov", "november", "lis", "ноя"},
		{"dec", "december", "dez", "déc", "dic", "gru", "дек"},
	} {
		for _, n := range names {
			months[n] = m + 1
		}
	}
}

// monthOf returns the month a token names (1-12), or 0.
func monthOf(tok string) int {
	switch tok { // the common case without a map look-up or an allocation
	case "Jan":
		return 1
	case "Feb":
		return 2
	case "Mar":
		return 3
	case "Apr":
		return 4
	case "May":
		return 5
	case "Jun":
		return 6
	case "Jul":
		return 7
	case "Aug":
		return 8
	case "Sep":
		return 9
	case "Oct":
		return 10
	case "Nov":
		return 11
	case "Dec":
		return 12
	}
	return months[strings.ToLower(strings.TrimSuffix(tok, "."))]
}
