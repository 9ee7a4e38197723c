-- A small shop for agentlab's examples: customers, orders, shipments, refunds.
-- Loaded into a fresh SQLite database on first use (agentlab/shop.py).
-- The bulk rows are generated from arithmetic on the ids, so every copy of the
-- database is identical; a few rows are then edited to tell the stories the
-- scenarios need (order 1042 was late; order 1077 was refunded).

PRAGMA foreign_keys = ON;

CREATE TABLE customers (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    city        TEXT NOT NULL,
    tier        TEXT NOT NULL CHECK (tier IN ('standard', 'plus', 'business')),
    since       TEXT NOT NULL
);

CREATE TABLE orders (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    placed_at   TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN
                ('placed', 'packed', 'shipped', 'delivered', 'cancelled', 'refunded', 'on hold')),
    total       REAL NOT NULL,
    items       TEXT NOT NULL,
    notes       TEXT NOT NULL DEFAULT ''
);

CREATE TABLE shipments (
    id           INTEGER PRIMARY KEY,
    order_id     INTEGER NOT NULL UNIQUE REFERENCES orders(id),
    carrier      TEXT NOT NULL,
    tracking     TEXT NOT NULL UNIQUE,
    promised_on  TEXT NOT NULL,
    shipped_on   TEXT,
    delivered_on TEXT,
    delay_reason TEXT
);

CREATE TABLE refunds (
    id          INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL REFERENCES orders(id),
    amount      REAL NOT NULL,
    reason      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    approved_by TEXT NOT NULL
);

-- 40 customers ------------------------------------------------------------
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
INSERT INTO customers (id, name, email, city, tier, since)
SELECT i,
       first || ' ' || last,
       lower(first) || '.' || lower(last) || i || '@example.com',
       CASE i % 6 WHEN 0 THEN 'Leeds' WHEN 1 THEN 'Bristol' WHEN 2 THEN 'Glasgow'
                  WHEN 3 THEN 'Cardiff' WHEN 4 THEN 'Belfast' ELSE 'Norwich' END,
       CASE WHEN i % 9 = 0 THEN 'business' WHEN i % 4 = 0 THEN 'plus' ELSE 'standard' END,
       date('2019-01-01', '+' || (i * 53) || ' days')
FROM (
    SELECT i,
           CASE i % 10 WHEN 0 THEN 'Amara' WHEN 1 THEN 'Ben' WHEN 2 THEN 'Chloe' WHEN 3 THEN 'Dev'
                       WHEN 4 THEN 'Elif' WHEN 5 THEN 'Farid' WHEN 6 THEN 'Grace' WHEN 7 THEN 'Dana'
                       WHEN 8 THEN 'Hugo' ELSE 'Isla' END AS first,
           CASE i % 7 WHEN 0 THEN 'Okafor' WHEN 1 THEN 'Hughes' WHEN 2 THEN 'Novak' WHEN 3 THEN 'Reid'
                      WHEN 4 THEN 'Santos' WHEN 5 THEN 'Whitfield' ELSE 'Moreau' END AS last
    FROM n
);

-- 240 orders, ids 1001..1240 ---------------------------------------------
WITH RECURSIVE n(i) AS (SELECT 1001 UNION ALL SELECT i + 1 FROM n WHERE i < 1240)
INSERT INTO orders (id, customer_id, placed_at, status, total, items)
SELECT i,
       1 + (i * 7) % 40,
       datetime('2024-01-02 09:00', '+' || ((i - 1001) * 9) || ' hours'),
       CASE WHEN i % 23 = 0 THEN 'cancelled' WHEN i > 1225 THEN 'placed' WHEN i > 1215 THEN 'shipped'
            ELSE 'delivered' END,
       round(12.5 + ((i * 37) % 180) + ((i * 13) % 100) / 100.0, 2),
       (1 + i % 3) || ' x ' ||
       CASE i % 8 WHEN 0 THEN 'Stoneware mug, sage glaze, 350 ml'
                  WHEN 1 THEN 'Pour-over kettle, brushed steel, 1.0 L'
                  WHEN 2 THEN 'Linen tea towel set (3), oat'
                  WHEN 3 THEN 'Cast-iron skillet, 26 cm, pre-seasoned'
                  WHEN 4 THEN 'Bamboo chopping board, large, with juice groove'
                  WHEN 5 THEN 'Glass storage jars (4), airtight clip lids'
                  WHEN 6 THEN 'Chef''s knife, 20 cm, German steel'
                  ELSE 'Ceramic pasta bowls (2), speckled white' END
       || '; 1 x ' ||
       CASE i % 5 WHEN 0 THEN 'Gift wrap, recycled kraft paper'
                  WHEN 1 THEN 'Beeswax food wraps, assorted sizes'
                  WHEN 2 THEN 'Spare filter papers (100)'
                  WHEN 3 THEN 'Oven glove, quilted cotton'
                  ELSE 'Wooden spoon set (3), beech' END
FROM n;

-- one shipment per order that left the warehouse --------------------------
INSERT INTO shipments (order_id, carrier, tracking, promised_on, shipped_on, delivered_on, delay_reason)
SELECT id,
       CASE id % 3 WHEN 0 THEN 'ParcelNorth' WHEN 1 THEN 'SwiftPost' ELSE 'Hermes Freight' END,
       'TRK' || (id * 7919 % 1000003),
       date(placed_at, '+4 days'),
       date(placed_at, '+1 day'),
       CASE WHEN status = 'delivered' THEN date(placed_at, '+3 days') END,
       NULL
FROM orders WHERE status IN ('shipped', 'delivered');

-- the stories -------------------------------------------------------------
-- Order 1042 (Dana Whitfield, customer 7) arrived five days late: held at the
-- carrier's hub during a storm, then mis-sorted.
UPDATE customers SET name = 'Dana Whitfield', email = 'dana.whitfield@example.com',
                     city = 'Bristol', tier = 'plus' WHERE id = 7;
UPDATE orders SET customer_id = 7, placed_at = '2024-03-04 10:12:00', status = 'delivered',
                  total = 86.40, items = '1 x Pour-over kettle, brushed steel, 1.0 L; 2 x Stoneware mug, sage glaze, 350 ml'
WHERE id = 1042;
UPDATE shipments SET carrier = 'ParcelNorth', tracking = 'PN-88213-GB', promised_on = '2024-03-08',
                     shipped_on = '2024-03-05', delivered_on = '2024-03-13',
                     delay_reason = 'held at the Avonmouth hub for three days during storm Ciara warnings, then mis-sorted to Cardiff'
WHERE order_id = 1042;

-- Order 1077 was refunded by billing.
UPDATE orders SET status = 'refunded' WHERE id = 1077;
INSERT INTO refunds (order_id, amount, reason, created_at, approved_by)
VALUES (1077, (SELECT total FROM orders WHERE id = 1077), 'arrived broken', '2024-03-20 15:02:00', 'billing: m.ortiz');
