// Command probe is the emulation backend's test program, run under Wine. It
// performs its arguments in order:
//
//	print TEXT       write TEXT and a newline to stdout
//	eprint TEXT      write TEXT and a newline to stderr
//	env NAME         print NAME=VALUE (or NAME unset)
//	cwd              print the working directory
//	write PATH TEXT  create PATH holding TEXT
//	read PATH        print PATH's content, or "error: ..." on failure
//	exists PATH      print "yes" or "no"
//	fill PATH KB     create PATH holding KB KiB, synced
//	dial ADDR        connect to the TCP address ADDR and print what it sends
//	burn MS          spin for MS milliseconds of CPU
//	alloc MB         allocate and touch MB MiB, kept until exit
//	cat              copy stdin to stdout until EOF
//	wait             print "waiting", then wait for an interrupt (CTRL_C)
//	                 and print "interrupted"
//	sleep            block forever
//	exit N           exit with status N
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"time"
)

var keep [][]byte

func main() {
	args := os.Args[1:]
	for len(args) > 0 {
		op := args[0]
		args = args[1:]
		arg := func() string {
			if len(args) == 0 {
				fmt.Fprintf(os.Stderr, "%s: missing argument\n", op)
				os.Exit(100)
			}
			a := args[0]
			args = args[1:]
			return a
		}
		if !ioOp(op, arg) && !processOp(op, arg) {
			fmt.Fprintf(os.Stderr, "unknown operation %q\n", op)
			os.Exit(100)
		}
	}
}

// ioOp runs the operations on output, the environment and files.
func ioOp(op string, arg func() string) bool {
	switch op {
	case "print":
		fmt.Println(arg())
	case "eprint":
		fmt.Fprintln(os.Stderr, arg())
	case "env":
		name := arg()
		if v, ok := os.LookupEnv(name); ok {
			fmt.Printf("%s=%s\n", name, v)
		} else {
			fmt.Printf("%s unset\n", name)
		}
	case "cwd":
		d, err := os.Getwd()
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println(d)
		}
	case "write":
		p, text := arg(), arg()
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("wrote", p)
		}
	case "read":
		b, err := os.ReadFile(arg())
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println(string(b))
		}
	case "exists":
		if _, err := os.Stat(arg()); err == nil {
			fmt.Println("yes")
		} else {
			fmt.Println("no")
		}
	case "fill":
		p := arg()
		kb, _ := strconv.Atoi(arg())
		f, err := os.Create(p)
		if err == nil {
			_, err = f.Write(make([]byte, kb<<10))
			if serr := f.Sync(); err == nil {
				err = serr
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("filled", p)
		}
	case "dial":
		c, err := net.DialTimeout("tcp", arg(), 10*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println(string(b))
		}
	default:
		return false
	}
	return true
}

// processOp runs the operations on the process itself: CPU, memory,
// stdin, waiting and exiting.
func processOp(op string, arg func() string) bool {
	switch op {
	case "burn":
		ms, _ := strconv.Atoi(arg())
		end := time.Now().Add(time.Duration(ms) * time.Millisecond)
		n := 0
		for time.Now().Before(end) {
			for i := 0; i < 100000; i++ {
				n += i
			}
		}
		fmt.Println("burnt", n != 0)
	case "alloc":
		mb, _ := strconv.Atoi(arg())
		b := make([]byte, mb<<20)
		for i := range b {
			b[i] = byte(i)
		}
		keep = append(keep, b)
		fmt.Println("allocated", mb)
	case "cat":
		io.Copy(os.Stdout, os.Stdin)
	case "wait":
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		fmt.Println("waiting")
		<-c
		fmt.Println("interrupted")
	case "sleep":
		for {
			time.Sleep(time.Hour)
		}
	case "exit":
		n, _ := strconv.Atoi(arg())
		os.Exit(n)
	default:
		return false
	}
	return true
}
